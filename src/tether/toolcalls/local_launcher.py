"""The local launcher: a call's process tree is a child of the server, in its own session."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import dataclasses
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import BinaryIO

from tether import model_texts
from tether.sandbox.limits import Resources
from tether.toolcalls import process_tree
from tether.toolcalls.launcher import (
    MARKER_VAR,
    EndCause,
    LaunchedProcess,
    LaunchSpec,
    OutputSink,
)
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


async def _pump(pipe: BinaryIO, name: str, sink: OutputSink) -> None:
    """Pass what comes on ``pipe`` to ``sink``, decoded, until its end."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_SIZE)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while chunk := await reader.read(_READ_SIZE):
            sink(name, decoder.decode(chunk))
        sink(name, decoder.decode(b"", final=True))
    finally:
        transport.close()


@dataclasses.dataclass(frozen=True)
class Spawned:
    """A started root, and the read ends of its stdout and stderr.

    The pipes are the server's own, not the subprocess transport's: asyncio's ``wait``
    waits for its own pipes to close too, so a background child holding them held the
    call's end until the child exited (``sleep 600 &`` ten minutes) instead of the drain
    time. Whoever follows the output closes them; until then nothing else does.
    """

    proc: asyncio.subprocess.Process
    stdout: int
    stderr: int

    @property
    def pid(self) -> int:
        return self.proc.pid


class LocalProcess:
    """A process tree the server started, rooted at ``pid`` and led by its group."""

    def __init__(
        self,
        spawned: Spawned,
        spec: LaunchSpec,
        supervised: bool = False,
        members: Callable[[], list[int]] | None = None,
    ) -> None:
        self._spawned = spawned
        proc = self._proc = spawned.proc
        # ``supervised``: the root only watches over the command (a sandbox), so a graceful
        # stop spares it (see process_tree.Target.spare_root). ``members``: its processes
        # are read from its limits group (see process_tree.Target.members).
        self._target = process_tree.Target(
            proc.pid, proc.pid, spec.marker, spec.started_at, supervised, members
        )
        self._taking = threading.Lock()

    @property
    def pgid(self) -> int:
        return self._proc.pid

    def target(self) -> process_tree.Target:
        """How to find the tree's processes now: once the root is reaped, its pid may be
        anyone's, and its group's number too once the group has emptied."""
        with self._taking:  # asked on the loop and in a stop's worker thread
            if self._proc.returncode is not None:
                self._target = self._target.reaped()
            return self._target

    async def follow(self, sink: OutputSink) -> None:
        proc, spawned = self._proc, self._spawned
        pipes = [os.fdopen(fd, "rb", buffering=0) for fd in (spawned.stdout, spawned.stderr)]
        pumps = [
            asyncio.ensure_future(_pump(pipe, name, sink))
            for pipe, name in zip(pipes, ("stdout", "stderr"), strict=True)
        ]
        try:
            await proc.wait()
            self.target()  # its group's number is checked before another can take it
            try:
                await within(asyncio.shield(asyncio.gather(*pumps)), _DRAIN_AFTER_EXIT)
            except TimeoutError:
                sink("stderr", model_texts.OUTPUT_KEPT_OPEN)
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            # Each pump ends (a failed one does not end the other) before the pipes are
            # closed: a pipe closed under a live reader left the loop watching its number.
            for pump in pumps:
                pump.cancel()
            await asyncio.wait(pumps)
            for pump in pumps:
                if not pump.cancelled():
                    pump.exception()  # retrieved: a failure is the caller's, raised above
            for pipe in pipes:  # a pump cancelled before its first step never had it
                pipe.close()

    async def wait(self) -> int:
        return await self._proc.wait()

    async def set_kill_deadline(self, kill_after: float | None) -> None:
        """Nothing to do: the coordinator's own timer enforces deadlines here."""

    async def resources(self) -> Resources | None:
        return None

    def end_cause(self) -> EndCause | None:
        return None


async def spawn(
    spec: LaunchSpec,
    argv: Sequence[str],
    preexec: Callable[[], None] | None,
    pass_fds: Sequence[int] = (),
) -> Spawned:
    """Start ``argv`` for ``spec`` in a new session, output piped, stdin empty, with
    ``pass_fds`` open in the child too."""
    ours: list[int] = []  # the read ends
    theirs: list[int] = []  # the write ends, the child's stdout and stderr
    try:
        for _ in range(2):
            read, write = os.pipe()
            ours.append(read)
            theirs.append(write)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=spec.cwd,
            env={**spec.env, MARKER_VAR: spec.marker},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=theirs[0],
            stderr=theirs[1],
            start_new_session=True,
            preexec_fn=preexec,
            pass_fds=pass_fds,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    return Spawned(proc, ours[0], ours[1])


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
        mine = [t.target for t in trees if isinstance(t, LocalProcess)]
        if mine:
            await asyncio.to_thread(process_tree.terminate_many, mine, grace, force)
