"""The coordinator: the one face of tool calls for the agent, the API and the tasks.

It wires the parts, each with one job, and forwards to them:

- ``index.CallIndex``: which calls are in flight; look-ups of any call.
- ``reading.OutputReader``: output so far, and following it live.
- ``running.CallRunner``: a call from admission to its end or the background.
- ``actions.CallActions``: cancel, offload, extend, deadlines; every stop.
- ``recorder.CallRecorder``: the store kept in step; the end recorded once.
- ``launcher.Launcher``: process trees (``local_launcher.LocalLauncher`` by default).

The agent awaits :meth:`ToolCallCoordinator.run` for each call. It returns when the call
ends, or at once when the call is moved to the background; in that case the call keeps
running here and its result is handed to ``on_background_result`` (or the receiver
given to :meth:`ToolCallCoordinator.deliver_background_results_to`) when it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tether.store.records import OutputChunk, ToolCallRecord
from tether.store.toolcalls import ToolCallRepository
from tether.toolcalls import deadlines as dl
from tether.toolcalls.actions import CallActions
from tether.toolcalls.call import CallInfo, CallObserver, CallOutcome, CallOutput, Invocation
from tether.toolcalls.config import CoordinatorConfig
from tether.toolcalls.index import CallIndex
from tether.toolcalls.launcher import LaunchedProcess, Launcher
from tether.toolcalls.live_call import LiveCall
from tether.toolcalls.local_launcher import LocalLauncher
from tether.toolcalls.mirror import OutputMirror
from tether.toolcalls.owned_tasks import OwnedTasks
from tether.toolcalls.reading import OutputReader
from tether.toolcalls.recorder import CallRecorder
from tether.toolcalls.running import Ask, BackgroundResult, CallRunner
from tether.tools.base import Tool, ToolResult
from tether.tools.shell import describe_end

__all__ = ["CoordinatorConfig", "ToolCallCoordinator"]


class ToolCallCoordinator:
    """Runs tool calls and lets people watch, extend, offload and cancel them."""

    def __init__(
        self,
        repo: ToolCallRepository,
        config: CoordinatorConfig,
        workspace: Path,
        protected: tuple[Path, ...],
        on_background_result: BackgroundResult | None = None,
        launcher: Launcher | None = None,
        mirror: OutputMirror | None = None,
    ) -> None:
        launcher = launcher or LocalLauncher()
        self._launcher = launcher
        self._tasks = OwnedTasks()
        self._index = CallIndex(repo, config.max_per_session, config.max_total)
        self._recorder = CallRecorder(repo, self._index, config, mirror)
        self._actions = CallActions(
            self._index, self._recorder, launcher, self._tasks, config.cancel_grace
        )
        self._runner = CallRunner(
            self._index,
            self._recorder,
            self._actions,
            launcher,
            self._tasks,
            (workspace, protected),
            on_background_result,
        )
        self._reader = OutputReader(self._index, repo)

    # ----------------------------------------------------------------- running

    async def run(
        self,
        inv: Invocation,
        tool: Tool,
        *,
        ask: Ask | None = None,
        observer: CallObserver | None = None,
    ) -> CallOutcome:
        """Run one call to its end (or until it is offloaded) and say what the model sees.

        ``ask``, if given, is awaited first: the call runs only if it answers yes."""
        return await self._runner.run(inv, tool, ask, observer)

    async def record_denied(self, inv: Invocation, reason: str) -> CallOutcome:
        """Record a call policy refused outright; it never runs."""
        return await self._runner.record_denied(inv, reason)

    async def adopt(
        self,
        record: ToolCallRecord,
        process: LaunchedProcess,
        kill_at: float | None,
    ) -> asyncio.Task[Any]:
        """Make a call a previous server started live again under its id (its tree
        still runs, or ended while no server was up: ``process`` then tells whether it
        was killed at its deadline). The task gives its outcome."""
        call = await self._recorder.revive(record, kill_at)
        call.process = process
        return self._runner.adopt(call, _follow_to_end(call, process))

    async def end_lost(self, record: ToolCallRecord, problem: str) -> CallOutcome:
        """End a call a previous server started that cannot be followed any more; one
        that was in the background tells its session so, as its result."""
        call = await self._recorder.revive(record, None)
        outcome = await self._recorder.finish(call, "error", problem, None)
        if record.status == "offloaded":
            await self._runner.deliver_in_background(
                record.session_id, record.id, outcome.model_text
            )
        return outcome

    def deliver_background_results_to(self, receiver: BackgroundResult) -> None:
        """Hand the results of calls that ended in the background to ``receiver``
        (session id, call id, the text for the model)."""
        self._runner.on_background_result = receiver

    # ----------------------------------------------------------------- looking

    def list_live(self, session_id: str) -> list[CallInfo]:
        """Calls in flight for a session, oldest first."""
        return self._index.list_live(session_id)

    def is_live_here(self, session_id: str, call_id: str) -> bool:
        """Whether this node runs the call now."""
        return self._index.get(session_id, call_id) is not None

    async def info(self, session_id: str, call_id: str) -> CallInfo:
        """Any call of the session, live or ended (ToolCallNotFound otherwise)."""
        return await self._index.info(session_id, call_id)

    async def final_seq(self, session_id: str, call_id: str) -> int | None:
        """The number of the call's last output chunk once it has ended; None while it
        runs (ToolCallNotFound if the session has no such call)."""
        return await self._reader.final_seq(session_id, call_id)

    async def output(self, session_id: str, call_id: str) -> CallOutput:
        """The output so far of a live or finished call."""
        return await self._reader.output(session_id, call_id)

    def follow(
        self, session_id: str, call_id: str, after_seq: int
    ) -> AsyncIterator[OutputChunk | CallInfo]:
        """Output chunks after ``after_seq`` as they come, then the final info."""
        return self._reader.follow(session_id, call_id, after_seq)

    # ----------------------------------------------------------------- acting

    async def cancel(self, session_id: str, call_id: str, force: bool) -> None:
        """Stop a call: SIGTERM to its process tree then SIGKILL, or SIGKILL at once."""
        await self._actions.cancel(session_id, call_id, force)

    async def offload(self, session_id: str, call_id: str) -> CallInfo:
        """Move a running call to the background; the model carries on without it."""
        return await self._actions.offload(session_id, call_id)

    async def extend(
        self, session_id: str, call_id: str, target: dl.DeadlineTarget, seconds: float | None
    ) -> CallInfo:
        """Move the kill or offload deadline later, or remove it (``seconds=None``)."""
        return await self._actions.extend(session_id, call_id, target, seconds)

    async def stop_task(self, task_id: str, reason: str) -> None:
        """Stop every call a task started, including ones in the background."""
        await self._actions.stop_task(task_id, reason)

    # ----------------------------------------------------------------- lifecycle

    def live_count(self) -> int:
        """How many calls are in flight on this node."""
        return len(self._index.all())

    def live_ids(self) -> list[tuple[str, str]]:
        """(session id, call id) of every call in flight on this node."""
        return [(c.session_id, c.call_id) for c in self._index.all()]

    def begin_shutdown(self, detach: bool = False) -> None:
        """From now on, calls stopped with their task are recorded as stopped by shutdown;
        with ``detach`` and a durable launcher, calls with a process are left running
        instead (the next start adopts them)."""
        self._runner.closing = True
        self._runner.detaching = detach and self._launcher.durable

    async def shutdown(self) -> None:
        """Stop every call in flight and record it as cancelled (reason: shutdown), but
        those a detaching shutdown leaves running: only stop following them."""
        self._runner.closing = True
        calls = self._index.all()
        if self._runner.detaching:
            kept = [c for c in calls if self._runner.leaves(c)]
            self._tasks.cancel_all()
            for call in kept:
                if call.work is not None:
                    call.work.cancel()
            calls = [c for c in calls if c not in kept]
        await self._actions.stop(calls, "server shutdown", force=False)
        await asyncio.gather(
            *(self._runner.stop_and_finish(c, "server shutdown", None) for c in calls),
            return_exceptions=True,
        )
        self._tasks.cancel_all()
        self._recorder.stop_storing()


async def _follow_to_end(call: LiveCall, process: LaunchedProcess) -> ToolResult:
    """An adopted call's work: its output into its buffer, then how it ended."""

    def emit(stream: str, text: str) -> None:
        call.buffer.append(stream, text)

    await process.follow(emit)
    return await describe_end(process)
