"""The keeper launcher: call trees start under the runner, not as the server's children.

It fills the same seam as the local launcher (start, stop, follow, await the end), plus
what only durable calls need: moving the kill deadline the runner enforces, and finding
a call again after a restart (:meth:`adopt`).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Sequence
from typing import Any

from tether import __version__
from tether.keeper import protocol
from tether.keeper.client import RunnerInfo, RunnerUnavailable
from tether.keeper.hub import KeeperHub
from tether.keeper.process import KeeperProcess
from tether.keeper.protocol import ProtocolError
from tether.sandbox import enter_limits, syscall_filter
from tether.sandbox.service import Sandbox
from tether.toolcalls.launcher import LaunchedProcess, LaunchSpec
from tether.waits import to_the_end

log = logging.getLogger(__name__)


class KeeperLauncher:
    """Starts trees under the home's runner and stops them through it; with a
    ``sandbox``, each tree in bwrap (unless the call runs outside it) and under its
    session's limits, which the runner applies and measures."""

    durable = True

    def __init__(
        self,
        hub: KeeperHub,
        output_limit: int | None,
        grace: float,
        sandbox: Sandbox | None = None,
        kept: bool = False,
    ) -> None:
        self.hub = hub
        self._output_limit = output_limit
        self._grace = grace
        self.sandbox = sandbox
        self._cleanups: set[asyncio.Task[None]] = set()
        #: The runner is one another version of Tether left, kept at start for the
        #: calls it ran (see startup.py): the first start to find it idle replaces it.
        self.kept = kept
        self._keeping = asyncio.Lock()
        # Start requests sent and not yet answered.
        self._starting = 0

    async def start(self, spec: LaunchSpec) -> KeeperProcess:
        """Ask the runner to start ``spec``; its kill deadline is ``kill_after`` seconds
        from now, enforced by the runner itself."""
        if not self.kept:
            return await self._launch(spec)
        # While a runner is kept, starts go one at a time: this server alone starts calls
        # on its home, so none can reach the runner between its idle answer and its exit.
        async with self._keeping:
            if self.kept and self._starting == 0:
                await self._replace_if_idle()
            return await self._launch(spec)

    async def _replace_if_idle(self) -> None:
        try:
            info = await self.hub.client.hello()
        except (RunnerUnavailable, ProtocolError):
            return  # gone: the start revives it, at this version
        if not info.of_another_version:
            self.kept = False
        elif info.calls == 0:
            log.info(
                "the runner pid %d (Tether %s), kept for its calls, is idle: replacing it "
                "with one of Tether %s",
                info.identity.pid,
                info.version,
                __version__,
            )
            # To its end even if this start is cancelled: cut after the old runner's exit,
            # the new one would run with nothing watching it.
            await to_the_end(self._replace(info))

    async def _replace(self, info: RunnerInfo) -> None:
        await self.hub.replace(info)
        self.kept = False

    async def _launch(self, spec: LaunchSpec) -> KeeperProcess:
        kill_at = None if spec.kill_after is None else time.time() + spec.kill_after
        # Listening before it starts.
        process = KeeperProcess(self.hub, spec.call_id, 0, marker=spec.marker)
        fields = {
            "call_id": spec.call_id,
            **await self._contained(spec),
            "cwd": str(spec.cwd),
            "env": dict(spec.env),
            "marker": spec.marker,
            "kill_at": kill_at,
            "output_limit": self._output_limit,
            "grace": self._grace,
        }
        starting = asyncio.ensure_future(self._start(fields))
        try:
            # Shielded: a turn stopped while its call starts must not cut the request
            # between the runner starting the tree and us learning of it.
            answer = await asyncio.shield(starting)
        except asyncio.CancelledError:
            starting.add_done_callback(lambda done: self._stop_unwatched(spec.call_id, done))
            raise
        process.pgid = int(answer["pid"])
        return process

    async def _start(self, fields: dict[str, Any]) -> dict[str, Any]:
        self._starting += 1
        try:
            return await self.hub.request("start", **fields)
        except RunnerUnavailable:
            # The runner died (its calls are lost, and said so): new calls get a new one.
            await self.hub.revive()
            return await self.hub.request("start", **fields)
        finally:
            self._starting -= 1

    def _stop_unwatched(self, call_id: str, start: asyncio.Future[dict[str, Any]]) -> None:
        """The start whose caller was cancelled has been answered: if the runner started
        the tree, nobody follows it, so it is killed (the call is recorded cancelled)."""
        if start.cancelled() or start.exception() is not None:
            return
        task = asyncio.ensure_future(self._kill(call_id))
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def _kill(self, call_id: str) -> None:
        try:
            await self.hub.request("signal", call_id=call_id, force=True)
        except (RunnerUnavailable, ProtocolError) as exc:  # already ended, or runner gone
            log.info("the unwatched call %s was not signalled: %s", call_id, exc)

    async def _contained(self, spec: LaunchSpec) -> dict[str, Any]:
        """The argv the runner starts, and what it must apply around it."""
        if self.sandbox is None:
            return {"argv": list(spec.argv)}
        plan = await self.sandbox.plan(spec)
        contained = {
            "argv": plan.argv,
            "limits": plan.containment.limits.as_dict(),
            "supervised": plan.supervised,
        }
        program = plan.syscall_filter
        if program is not None and self.hub.client.spoken >= protocol.since("syscall_filter"):
            contained["syscall_filter"] = base64.b64encode(program).decode()
        elif program is not None:
            # A runner left by an older version, kept for its calls, cannot take the
            # filter: a small exec step hands it to bwrap instead (one Python start).
            piped = enter_limits.piping(program, syscall_filter.FD_SLOT)
            contained["argv"] = enter_limits.through(piped, plan.argv)
        return contained

    async def stop(self, trees: Sequence[LaunchedProcess], grace: float, force: bool) -> None:
        """Ask the runner to stop each tree (SIGTERM then SIGKILL after its grace, or
        SIGKILL at once); returns once asked, the ends follow on the watch."""
        ids = [t.call_id for t in trees if isinstance(t, KeeperProcess)]
        if ids:
            await self.hub.request("signal", call_ids=ids, force=force)

    async def running(self) -> dict[str, dict[str, Any]]:
        """The calls the runner runs now, by id (pid, start time, deadline, position)."""
        answer = await self.hub.request("list")
        return {str(c["call_id"]): c for c in answer["calls"]}

    def adopt(
        self,
        call_id: str,
        pgid: int,
        running: bool,
        marker: str | None = None,
        since: float | None = None,
    ) -> KeeperProcess:
        """A handle on a call started before this server did; ``running`` False if the
        runner no longer runs it (it ended while the server was down, or was lost).
        ``marker`` and ``since`` (its spec's) find what is left of it should it be lost
        with its runner."""
        process = KeeperProcess(self.hub, call_id, pgid, adopted=True, marker=marker, since=since)
        if not running:
            process.mark_ended_already()
        return process
