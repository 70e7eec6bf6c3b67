"""The sandboxing launcher: the local launcher's process trees, each under its call's
limits and, unless the call runs outside it, inside bubblewrap."""

from __future__ import annotations

import asyncio

from tether.sandbox import syscall_filter
from tether.sandbox.limits import Resources
from tether.sandbox.service import Launch, Sandbox
from tether.toolcalls.launcher import LaunchSpec, OutputSink
from tether.toolcalls.local_launcher import LocalLauncher, LocalProcess, Spawned, spawn
from tether.waits import within

# How long a call's end waits for its tree to be reaped before giving up on its figures.
_END_WAIT = 5.0


class SandboxedProcess(LocalProcess):
    """A local tree whose usage is measured; the figures are final once it has ended."""

    def __init__(self, spawned: Spawned, spec: LaunchSpec, launch: Launch):
        # Its processes are read from its limits group where that can tell.
        super().__init__(spawned, spec, launch.supervised, launch.tree.members)
        self._launch = launch
        self._finished: asyncio.Future[Resources] | None = None

    def _finish(self) -> asyncio.Future[Resources]:
        # Once: whichever of follow, wait or resources sees the end first.
        if self._finished is None:
            self._finished = asyncio.ensure_future(self._launch.tree.finish())
        return self._finished

    async def follow(self, sink: OutputSink) -> None:
        try:
            await super().follow(sink)
        finally:
            # The tree has ended (or was killed because the reader was cancelled).
            self._finish()

    async def wait(self) -> int:
        code = await super().wait()
        await asyncio.shield(self._finish())
        return code

    async def resources(self) -> Resources | None:
        try:
            # The tree has been told to end when anyone asks; never hang a call's end on
            # a tree that somehow outlives its stop.
            await within(super().wait(), _END_WAIT)
        except TimeoutError:
            return None
        return await asyncio.shield(self._finish())


class SandboxLauncher(LocalLauncher):
    """Starts each tree as ``Sandbox.prepare`` says; stops trees as the local launcher
    does (bwrap is spared by a graceful stop, its command is not)."""

    def __init__(self, sandbox: Sandbox) -> None:
        super().__init__()
        self._sandbox = sandbox

    async def start(self, spec: LaunchSpec) -> SandboxedProcess:
        launch = await self._sandbox.prepare(spec)
        tree = launch.tree
        try:
            # The tree joins its limits group in a shell step before it execs the death
            # signal's setpriv and bwrap, so this spawn vforks like the local launcher's.
            wrapped = tree.command((*self._prefix, *launch.plan.argv))
            with syscall_filter.attached(wrapped, launch.plan.syscall_filter) as (argv, fds):
                spawned = await spawn(spec, argv, tree.preexec(self._pre_exec), fds)
        except BaseException:
            await asyncio.shield(tree.finish())
            raise
        tree.started(spawned.pid)
        return SandboxedProcess(spawned, spec, launch)
