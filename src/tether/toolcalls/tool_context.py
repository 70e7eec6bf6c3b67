"""The RunContext a tool receives: its call's facts and two narrow callbacks."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from tether.toolcalls.call import CallObserver
from tether.toolcalls.launcher import LaunchedProcess, LaunchSpec
from tether.toolcalls.live_call import LiveCall


class ToolContext:
    """What one running call's tool may see and do (implements ``tools.base.RunContext``).

    ``start`` starts a process tree (the launcher); ``launched`` is told once the call
    has one, so the coordinator can record it and stop it if a stop came meanwhile.
    """

    def __init__(
        self,
        call: LiveCall,
        workspace: Path,
        protected: tuple[Path, ...],
        observer: CallObserver | None,
        start: Callable[[LaunchSpec], Awaitable[LaunchedProcess]],
        launched: Callable[[LiveCall], None],
    ) -> None:
        self._call = call
        self._observer = observer
        self._start = start
        self._launched = launched
        self.call_id = call.call_id
        self.workspace = workspace
        self.protected = protected
        self.human_approved = call.human_approved

    def emit(self, stream: str, text: str) -> None:
        """Append output; the call's observer sees it at once."""
        chunk = self._call.buffer.append(stream, text)
        if chunk is not None and self._observer is not None:
            self._observer.output(self.call_id, chunk)

    async def launch(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]
    ) -> LaunchedProcess:
        """Start this call's process tree."""
        call = self._call
        _, kill_after = call.deadlines.remaining(time.monotonic())
        spec = LaunchSpec(
            argv,
            cwd,
            env,
            marker=call.marker,
            started_at=call.started_at,
            call_id=call.call_id,
            kill_after=kill_after,
            session_id=call.session_id,
            arguments=call.invocation.arguments,
            judged=call.invocation.judged,
        )
        asked = call.deadlines.kill_at
        call.process = await self._start(spec)
        self._launched(call)
        if call.deadlines.kill_at != asked:
            # Extended while the tree was starting: the launcher (the keeper's runner,
            # which enforces it on its own) has the deadline the spec carried.
            _, kill_after = call.deadlines.remaining(time.monotonic())
            await call.process.set_kill_deadline(kill_after)
        return call.process
