"""One call inside the runner: its process tree, its output file, its deadline, its end.

Everything here runs on the runner's event loop without a thread per call: the pipes
and a pidfd are watched with ``add_reader``, the deadline is a loop timer. Only a tree
kill (which waits for processes to exit) goes to a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tether.keeper import layout, records
from tether.keeper.call_descriptors import CallDescriptors
from tether.keeper.identity import identify
from tether.keeper.output_file import OutputFile
from tether.keeper.status import (
    CallEnd,
    CallSpec,
    StoppedBy,
    keep_rooms,
    write_end,
    write_spec,
)
from tether.keeper.stopper import TreeStopper
from tether.sandbox import syscall_filter
from tether.sandbox.limits import Resources
from tether.sandbox.tree import LimitedTree
from tether.toolcalls import process_tree
from tether.toolcalls.launcher import MARKER_VAR

log = logging.getLogger(__name__)

_READ_SIZE = 64 * 1024
# After the root exits, how long background children may keep the pipes open before
# the call ends anyway (otherwise `sleep 600 &` would hold it open for ten minutes).
DRAIN_AFTER_EXIT = 1.0


class RunningCall:
    """A started call. ``on_output(call_id, end)`` and ``on_end(call)`` tell the runner."""

    def __init__(
        self,
        spec: CallSpec,
        directory: Path,
        proc: subprocess.Popen[bytes],
        stopper: TreeStopper,
        on_output: Callable[[str, int], None],
        on_end: Callable[[RunningCall], None],
    ) -> None:
        self.spec, self.directory, self._stopper = spec, directory, stopper
        self._proc, self._on_output, self._on_end = proc, on_output, on_end
        self._loop = asyncio.get_running_loop()
        self._fds = CallDescriptors(self._loop)
        self._out = OutputFile(
            self._fds.adopt(
                os.open(
                    directory / layout.OUTPUT_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600
                )
            )
        )
        self._kept = 0
        self.dropped = 0
        self._pending: dict[int, bytes] = {}
        self._streams: dict[int, str] = {}
        self.stopped_by: StoppedBy | None = None
        self._stop_asked = False
        self._exit_status: int | None = None
        # The root leads a group of its own (see target()).
        self._group: int | None = self.spec.pid
        self._deadline: asyncio.TimerHandle | None = None
        self._drain: asyncio.TimerHandle | None = None
        self._failures = 0
        self.ended = False
        # The root only supervises the command (the sandbox's bwrap): spared by a
        # graceful stop, as the server's own launcher spares it.
        self.supervised = False
        self._tree: LimitedTree | None = None
        self._recording: asyncio.Task[None] | None = None
        assert proc.stdout is not None and proc.stderr is not None
        try:
            for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
                fd = self._fds.adopt_pipe(pipe)
                self._streams[fd], self._pending[fd] = name, b""
                self._fds.watch(fd, self._guarded, self._readable, fd)
            self._pidfd = self._fds.adopt(os.pidfd_open(proc.pid))
            self._fds.watch(self._pidfd, self._guarded, self._exited)
        except BaseException:
            # Nobody could follow it (out of descriptors?): it must not run unowned.
            self._fds.close_all()
            os.kill(proc.pid, signal.SIGKILL)
            raise
        self._arm_deadline()

    @property
    def call_id(self) -> str:
        return self.spec.call_id

    @property
    def position(self) -> int:
        """The position past the last record in the output file."""
        return self._out.position

    def measure(self, tree: LimitedTree) -> None:
        """Follow what the tree (started in ``tree``'s group) uses, and enforce the
        limits the kernel does not (CPU time, the process limit ending the call)."""
        self._tree = tree
        tree.started(self._proc.pid)

    # ------------------------------------------------------------------ output

    def _readable(self, fd: int) -> None:
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close_stream(fd)
            return
        data = self._pending[fd] + data
        cut = records.complete_utf8(data)
        self._pending[fd] = data[cut:]
        self._write(self._streams[fd], data[:cut])

    def _close_stream(self, fd: int) -> None:
        self._fds.close(fd)
        self._write(self._streams.pop(fd), self._pending.pop(fd))
        self._maybe_end()

    def _write(self, stream: str, data: bytes) -> None:
        """Append ``data`` as a record, within the output limit (past it: one note)."""
        if not data:
            return
        limit = self.spec.output_limit
        if limit is not None:
            if self.dropped:
                self.dropped += len(data)
                return
            room = limit - self._kept
            if len(data) > room:
                self.dropped = len(data) - room
                kept = data[:room].decode("utf-8", errors="ignore").encode()
                self._kept += len(kept)
                self._append(stream, kept)
                note = (
                    f"\n[tether: output limit of {limit} bytes reached; "
                    "the rest of this call's output is not kept]\n"
                )
                self._append("stderr", note.encode())
                return
        self._kept += len(data)
        self._append(stream, data)

    def _append(self, stream: str, data: bytes) -> None:
        if self._out.append(stream, data):
            self._on_output(self.call_id, self.position)

    # ------------------------------------------------------------------ deadline

    def extend(self, kill_at: float | None) -> None:
        """Move the absolute kill deadline (epoch seconds; None: no deadline)."""
        self.spec = replace(self.spec, kill_at=kill_at)
        write_spec(self.directory, self.spec)
        self._arm_deadline()

    def kill_in(self) -> float | None:
        """Seconds until the runner stops the call for its deadline (None: it has
        none), by the loop's clock: what the timer will do, whatever the wall clock
        did since ``kill_at`` was set."""
        if self._deadline is None or self._deadline.cancelled():
            return None
        return max(0.0, self._deadline.when() - self._loop.time())

    def _arm_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self.spec.kill_at is not None and not self.ended:
            delay = max(0.0, self.spec.kill_at - time.time())
            self._deadline = self._loop.call_later(
                delay, self._guarded, self.stop, "deadline", False
            )

    # ------------------------------------------------------------------ stopping

    def stop(self, by: StoppedBy, force: bool) -> None:
        """Stop the whole tree: SIGTERM, SIGKILL after the grace (``force``: at once)."""
        if self._exit_status is None:
            self._exited()  # an exit the loop has not heard of yet was the command's own
        if self.ended or (self._stop_asked and not force):
            return
        self._stop_asked = True
        if self._exit_status is None:
            self.stopped_by = self.stopped_by or by
        # Else the command had ended by itself: the stop is for what it left running
        # (holding the output open), and its end stays its own.
        self._stopper.request(self, force)

    def target(self) -> process_tree.Target:
        """How to find the call's processes now."""
        target = process_tree.Target(
            self.spec.pid,
            self._group,
            self.spec.marker,
            since=self.spec.create_time,
            spare_root=self.supervised,
            members=self._tree.members if self._tree is not None else None,
        )
        if self._exit_status is not None:
            target = target.reaped()
            self._group = target.pgid
        return target

    # ------------------------------------------------------------------ the end

    def _reap(self) -> int | None:
        """The root's wait status if it has exited (it is reaped now), else None."""
        try:
            pid, status = os.waitpid(self._proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped already: nothing more can be learnt
            pid, status = self._proc.pid, 255 << 8
        if pid == 0:
            return None
        self._proc.returncode = 0  # reaped here; keeps Popen from reaping or warning
        return status

    def _exited(self) -> None:
        status = self._reap()
        if status is None:  # a spurious wake-up: it still runs
            return
        self._exit_status = status
        self.target()  # its group's number is checked before another can take it
        self._fds.close(self._pidfd)
        if self._deadline is not None:
            self._deadline.cancel()
        self._drain = self._loop.call_later(DRAIN_AFTER_EXIT, self._guarded, self._stop_draining)
        self._maybe_end()

    def _stop_draining(self) -> None:
        if self._streams:
            for fd in list(self._streams):
                self._fds.close(fd)
                self._write(self._streams.pop(fd), self._pending.pop(fd))
            self._append("stderr", b"\n[tether: background processes kept the output open]\n")
        self._maybe_end()

    def _maybe_end(self) -> None:
        if self.ended or self._exit_status is None or self._streams:
            return
        self._end()

    def _end(self) -> None:
        """Release the call's descriptors and timers, then record its end (see
        :meth:`_record_end`)."""
        self.ended = True
        for timer in (self._deadline, self._drain):
            if timer is not None:
                timer.cancel()
        try:
            self._out.settle()
        except OSError:
            log.exception("call %s: noting the output lost failed", self.call_id)
        self._fds.close_all()
        if self._tree is None:
            self._record_end(None)
        else:
            # The group's last reading (and a kill if a limit was passed) is a trip to
            # a worker thread; the end is recorded once it is known.
            self._recording = self._loop.create_task(self._measure_then_record(self._tree))

    async def _measure_then_record(self, tree: LimitedTree) -> None:
        try:
            resources: dict[str, Any] | None = self._with_stop(await tree.finish()).as_record()
        except Exception:
            log.exception("measuring call %s failed", self.call_id)
            resources = None
        self._record_end(resources)

    def _with_stop(self, used: Resources) -> Resources:
        """``killed_by`` completed with what the runner stopped the call for."""
        if used.killed_by is not None or self.stopped_by is None:
            return used
        return replace(used, killed_by="deadline" if self.stopped_by == "deadline" else "cancel")

    def _record_end(self, resources: dict[str, Any] | None) -> None:
        """Write status.json (when the exit status is known) and tell the runner. Never
        raises: whatever went wrong, the call must leave the runner's list, or the
        runner would wait for it forever (and so ignore SIGTERM)."""
        status = self._exit_status
        if status is None:
            log.error("call %s ended with its exit status unknown: no status.json", self.call_id)
        else:
            try:
                write_end(self.directory, self._end_record(status, resources))
            except Exception:
                log.exception("the end of call %s could not be recorded", self.call_id)
        self._on_end(self)

    def _end_record(self, status: int, resources: dict[str, Any] | None) -> CallEnd:
        return CallEnd(
            exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            ended_at=time.time(),
            stopped_by=self.stopped_by,
            output_end=self.position,
            dropped_bytes=self.dropped + self._out.lost,
            resources=resources,
        )

    # ------------------------------------------------------------------ errors

    def _guarded(self, step: Callable[..., None], *args: Any) -> None:
        """Run one of the loop's callbacks for this call. An error in it must not reach
        the loop: a reader's callback would run again at once and fail again, and the
        call would never end. It ends the call instead (see :meth:`_fail`)."""
        try:
            step(*args)
        except Exception:
            log.exception("call %s: %s failed", self.call_id, getattr(step, "__name__", step))
            self._fail()

    def _fail(self) -> None:
        """After an error: keep no more output, kill the tree, and end once the root is
        reaped. A second error, or one after the root was reaped, ends it at once."""
        self._failures += 1
        if self._failures > 1 or self._exit_status is not None:
            self.abandon()
            return
        for fd in list(self._streams):
            self._fds.close(fd)
            del self._streams[fd], self._pending[fd]
        self._kill_tree()

    def _kill_tree(self) -> None:
        self._stop_asked = True
        try:
            if self._exit_status is None:
                # Not reaped yet, so the pid is still the root's: no scan needed for it.
                os.kill(self._proc.pid, signal.SIGKILL)
            self._stopper.request(self, True)
        except Exception:
            log.exception("killing the tree of call %s failed", self.call_id)

    def abandon(self) -> None:
        """End the call now, whatever state it is in (the last resort): its tree is
        killed, its descriptors released, its end recorded if the root has exited, and
        the runner forgets it."""
        if self.ended:
            return
        self._kill_tree()
        if self._exit_status is None:
            try:
                self._exit_status = self._reap()
            except Exception:
                log.exception("reaping call %s failed", self.call_id)
        self._streams.clear()
        self._pending.clear()
        self._end()


def spawn(
    directory: Path,
    draft: CallSpec,
    env: dict[str, str],
    tree: LimitedTree | None = None,
    program: bytes | None = None,
) -> tuple[subprocess.Popen[bytes], float]:
    """Start ``draft``'s argv in its cwd, in a session of its own (its own process
    group), stdin closed, stdout and stderr piped to the runner, inside ``tree``'s
    limits group if given (joined before the command's first instruction), under the
    seccomp ``program`` if given (bwrap's, see syscall_filter.attached); its tree
    carries ``draft``'s marker in the environment. Returns the process and its start
    time. ``draft`` is the call's spec with no process yet: the disk its spec and its
    end will need is taken first (see status.keep_rooms)."""
    directory.mkdir(parents=True, exist_ok=True)
    # The file exists before the call does: anyone following it never sees it missing.
    (directory / layout.OUTPUT_NAME).touch(mode=0o600)
    keep_rooms(directory, draft)
    argv, cwd, marker = draft.argv, draft.cwd, draft.marker
    env = {**env, MARKER_VAR: marker}
    wrapped = argv if tree is None else tree.command(argv)
    with syscall_filter.attached(wrapped, program) as (command, fds):
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            restore_signals=True,
            # None unless the group can only be joined in the child (rlimits): then fork.
            preexec_fn=None if tree is None else tree.preexec(None),
            pass_fds=fds,
        )
    try:
        started = identify(proc.pid).create_time
    except Exception:
        started = time.time()
    return proc, started


def describe(end: CallEnd) -> str:
    """A one-line account of an end (``exit code 0``, ``terminated by SIGTERM``)."""
    if end.signal is not None:
        try:
            name = signal.Signals(end.signal).name
        except ValueError:
            name = f"signal {end.signal}"
        return f"terminated by {name}"
    return f"exit code {end.exit_code}"
