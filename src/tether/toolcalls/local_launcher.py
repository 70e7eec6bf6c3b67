"""The local launcher: a call's process tree is a child of the server, in its own session."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import os
import shutil
import signal
import sys
from collections.abc import Callable, Sequence

from tether import model_texts
from tether.sandbox.limits import Resources
from tether.toolcalls import process_tree
from tether.toolcalls.launcher import MARKER_VAR, LaunchedProcess, LaunchSpec, OutputSink
from tether.waits import within

_READ_SIZE = 64 * 1024
# After the root exits, how long a background child may keep its pipes open before we
# stop reading (otherwise `sleep 600 &` would hold the call open for ten minutes).
_DRAIN_AFTER_EXIT = 1.0
_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


def death_signal_prefix() -> tuple[str, ...]:
    """A command prefix making the root get SIGKILL if the server dies (Linux only).

    Commands run in their own session, so a server killed with SIGKILL would otherwise
    leave them running until the next start reaps them. This covers the root itself;
    its children stay in its process group, which start-up recovery kills.

    util-linux's setpriv sets the signal and execs the command. It costs one exec, where
    the alternative (:func:`die_with_server`, a pre-exec hook) makes Python fork the
    whole server instead of vfork-ing it, which blocked the event loop for 4-10 ms per
    spawn. The hook stays as the fallback where setpriv is missing.
    """
    if not sys.platform.startswith("linux"):
        return ()
    setpriv = shutil.which("setpriv")
    return (setpriv, "--pdeathsig", "KILL", "--") if setpriv else ()


def die_with_server() -> Callable[[], None] | None:
    """A pre-exec hook with the same effect as :func:`death_signal_prefix`."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    server_pid = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The server may have died between fork and prctl: then no signal would come.
        if os.getppid() != server_pid:
            os._exit(137)

    return arm


async def _pump(stream: asyncio.StreamReader, name: str, sink: OutputSink) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := await stream.read(_READ_SIZE):
        sink(name, decoder.decode(chunk))
    sink(name, decoder.decode(b"", final=True))


class LocalProcess:
    """A process tree the server started, rooted at ``pid`` and led by its group."""

    def __init__(
        self, proc: asyncio.subprocess.Process, spec: LaunchSpec, supervised: bool = False
    ) -> None:
        self._proc = proc
        # ``supervised``: the root only watches over the command (a sandbox), so a graceful
        # stop spares it (see process_tree.Target.spare_root).
        self.target = process_tree.Target(
            proc.pid, proc.pid, spec.marker, spec.started_at, spare_root=supervised
        )

    @property
    def pgid(self) -> int:
        return self._proc.pid

    async def follow(self, sink: OutputSink) -> None:
        proc = self._proc
        assert proc.stdout is not None and proc.stderr is not None
        readers = asyncio.gather(
            _pump(proc.stdout, "stdout", sink), _pump(proc.stderr, "stderr", sink)
        )
        try:
            await proc.wait()
            try:
                await within(asyncio.shield(readers), _DRAIN_AFTER_EXIT)
            except TimeoutError:
                readers.cancel()
                sink("stderr", model_texts.OUTPUT_KEPT_OPEN)
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await readers

    async def wait(self) -> int:
        return await self._proc.wait()

    async def set_kill_deadline(self, kill_after: float | None) -> None:
        """Nothing to do: the coordinator's own timer enforces deadlines here."""

    async def resources(self) -> Resources | None:
        return None


async def spawn(
    spec: LaunchSpec,
    argv: Sequence[str],
    preexec: Callable[[], None] | None,
    pass_fds: Sequence[int] = (),
) -> asyncio.subprocess.Process:
    """Start ``argv`` for ``spec`` in a new session, output piped, stdin empty, with
    ``pass_fds`` open in the child too."""
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=spec.cwd,
        env={**spec.env, MARKER_VAR: spec.marker},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        preexec_fn=preexec,
        pass_fds=pass_fds,
    )


class LocalLauncher:
    """Starts trees as the server's children (each in a new session) and stops them by
    process group, descendants and environment marker (see ``process_tree``)."""

    durable = False

    def __init__(self) -> None:
        self._prefix = death_signal_prefix()
        self._pre_exec = None if self._prefix else die_with_server()

    async def start(self, spec: LaunchSpec) -> LocalProcess:
        return LocalProcess(await spawn(spec, (*self._prefix, *spec.argv), self._pre_exec), spec)

    async def stop(self, trees: Sequence[LaunchedProcess], grace: float, force: bool) -> None:
        # Only trees this launcher started can be here: the coordinator has one launcher.
        targets = [t.target for t in trees if isinstance(t, LocalProcess)]
        if targets:
            await asyncio.to_thread(process_tree.terminate_many, targets, grace, force)
