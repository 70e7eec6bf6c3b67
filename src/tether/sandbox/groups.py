"""What every limit mechanism offers a call: a group its processes join, read and kill."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from tether.sandbox.limits import Limits, Mechanism, Usage


class CallGroup(Protocol):
    """One call's share of the machine under some mechanism."""

    def join(self) -> None:
        """Put the calling process under the limits (runs in the child before exec)."""

    def join_command(self, argv: Sequence[str]) -> list[str] | None:
        """An argv that puts its process under the limits, then execs ``argv``; None when
        only :meth:`join` in the child can (then the parent must fork, not vfork)."""

    def attach(self, pid: int) -> None:
        """Learn the call's root process once it exists."""

    def read(self) -> Usage:
        """What the call's processes use now (blocking file reads: call from a thread)."""

    #: Whether :meth:`members` is the whole tree (a cgroup, which a process cannot leave).
    knows_members: bool

    def members(self) -> list[int]:
        """Every process the group holds (empty when the mechanism cannot tell)."""

    def close(self) -> bool:
        """Release the group; False while processes (or zombies) still hold it."""


class Enforcer(Protocol):
    """A mechanism that can hand out call groups."""

    mechanism: Mechanism

    def create(self, name: str, limits: Limits) -> CallGroup:
        """A fresh group for one call with ``limits`` applied (blocking)."""

    def close(self) -> None:
        """Remove this server's own directories (at shutdown, once calls are gone)."""


def write(path: Path, value: str) -> None:
    """Write a control file in one write(2), as the kernel expects."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def read_text(path: Path) -> str | None:
    """A control file's content, or None when it is absent or unreadable."""
    try:
        return path.read_text()
    except OSError:
        return None


# Number and "key value" files are far smaller than this (pids.events, memory.events,
# cpu.stat: a few lines).
_SMALL_FILE = 8192


def _read_small(path: str | Path) -> bytes | None:
    """A small control file in one read, below pathlib and text decoding: a runner with
    1,000 calls reads six of these per call every few seconds."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, _SMALL_FILE)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_int(path: str | Path) -> int | None:
    """A control file holding one number, or None when absent, unreadable or not one."""
    data = _read_small(path)
    if data is None:
        return None
    with contextlib.suppress(ValueError):
        return int(data)
    return None


def keyed(path: str | Path, key: str) -> int | None:
    """The number after ``key`` in a "key value" per line file (memory.events, ...)."""
    wanted = key.encode()
    for line in (_read_small(path) or b"").splitlines():
        name, _, value = line.partition(b" ")
        if name == wanted:
            with contextlib.suppress(ValueError):
                return int(value)
    return None


def procs(path: Path) -> list[int]:
    text = read_text(path) or ""
    return [int(p) for p in text.split()]


# Writes 0 (itself) into each control file named before "--", then execs the rest: the
# process is in every group before the call's first instruction runs, so nothing it
# forks can start outside them, and a refused write (exit 125, the shell saying why on
# stderr) never runs the call at all.
_JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'


def join_by_shell(files: list[Path], argv: Sequence[str]) -> list[str]:
    """``argv`` behind a small shell step that joins the groups of ``files``.

    Joining in a pre-exec hook instead makes Python fork the parent (vfork cannot run
    one) and blocks the parent until the move is done. The shell is single-threaded,
    so on cgroup v1 it can move itself through ``tasks`` (one thread, "0": itself),
    which recent kernels do without the global lock whose writers wait for an RCU grace
    period (10-20 ms here); ``cgroup.procs`` takes that lock.
    """
    return ["/bin/sh", "-c", _JOIN_SCRIPT, "tether-join", *map(str, files), "--", *argv]


def join_procs(files: list[Path]) -> None:
    """Move this process into each cgroup (``cgroup.procs`` files), before exec."""
    pid = str(os.getpid())
    for file in files:
        write(file, pid)


def remove_dirs(dirs: list[Path]) -> bool:
    """rmdir each cgroup; True when none is left (a busy one stays, for a later try)."""
    for directory in dirs:
        with contextlib.suppress(FileNotFoundError, OSError):
            directory.rmdir()
    return not any(d.exists() for d in dirs)


# Rounds of reading a group's members and killing them: one that forks between a read and
# the kills is caught by the next; its process limit bounds how many can appear at once.
_KILL_ROUNDS = 200


def kill_members(directory: Path) -> int:
    """SIGKILL every process in the cgroup ``directory`` until none is left alive (blocking;
    a few milliseconds unless a fork loop fights back); how many were killed. On cgroup v2
    ``cgroup.kill`` does it in one write, forks included."""
    with contextlib.suppress(OSError):
        write(directory / "cgroup.kill", "1")
    killed: set[int] = set()
    for _ in range(_KILL_ROUNDS):
        alive = [pid for pid in procs(directory / "cgroup.procs") if not _dead(pid)]
        if not alive:
            break
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed.update(alive)
        time.sleep(0.005)
    return len(killed)


def _dead(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie (whoever its parent is reaps it; it holds no
    resource but its entry)."""
    stat = _read_small(f"/proc/{pid}/stat")
    # The state follows the command name, which is in parentheses.
    state = (stat or b"").rpartition(b")")[2].split()[:1]
    return state in ([], [b"Z"], [b"X"])
