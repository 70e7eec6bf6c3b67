"""One server per ``TETHER_HOME``: two would both adopt (and finish) the same calls."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from tether.keeper import layout


class HomeInUse(Exception):
    """Another live server holds this home (or its lock cannot be taken: the message
    says why)."""


@dataclass
class HomeLock:
    """The home held by this process; ``holds`` counts the holders within it (the
    command line takes it before it touches the database, the app again)."""

    key: str
    fds: tuple[int, ...]
    holds: int = 1


_held: dict[str, HomeLock] = {}


def hold(home: Path) -> HomeLock:
    """Take the home's server lock (held until :func:`release` or the process ends,
    ``kill -9`` included: the kernel drops a dead process's flock). Raises HomeInUse
    naming the holder's pid. Taken again by the process that holds it, it is the same
    lock, held until each hold is released.

    Two locks: one on the home directory itself, which cannot be deleted from under a
    server while its calls are in it (a deleted ``server.lock`` let a second server
    start and adopt the first one's calls), and the ``server.lock`` file that older
    versions lock, which also names the holder."""
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise HomeInUse(_refusal(home, exc)) from None
    key = str(home.resolve())
    if (held := _held.get(key)) is not None:
        held.holds += 1
        return held
    fds: list[int] = []
    try:
        for path, flags in (
            (home, os.O_RDONLY | os.O_DIRECTORY),
            (layout.server_lock(home), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK),
        ):
            fds.append(os.open(path, flags | os.O_CLOEXEC, 0o600))
            fcntl.flock(fds[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fds[-1], 0)
        os.write(fds[-1], str(os.getpid()).encode())
    except BlockingIOError:
        _close(fds)
        raise HomeInUse(
            f"another Tether server (pid {holder_named(home) or 'unknown'}) already serves "
            f"{home}; two servers on one TETHER_HOME would both adopt its tool calls. Stop "
            "it, or use another TETHER_HOME."
        ) from None
    except OSError as exc:
        _close(fds)
        raise HomeInUse(_refusal(home, exc)) from None
    lock = _held[key] = HomeLock(key, tuple(fds))
    return lock


#: What a write refused for want of room says (a quota counts as a full disk).
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


def _refusal(home: Path, exc: OSError) -> str:
    """Why the home cannot be held, in one line naming the path that failed."""
    path = exc.filename or layout.server_lock(home)
    if exc.errno in _NO_ROOM:
        return (
            f"cannot take {home}'s server lock: {path} cannot be written, its disk is full "
            f"({exc.strerror}); make room, or use another TETHER_HOME."
        )
    return (
        f"cannot take {home}'s server lock ({path}: {exc.strerror}); "
        "remove what is in its place, or use another TETHER_HOME."
    )


def holder_named(home: Path) -> int | None:
    """The pid the lock file names (whoever holds it, or held it last)."""
    try:
        raw = layout.read_file(layout.server_lock(home), 32)
        return int((raw or b"").decode().strip())
    except (layout.Unreadable, ValueError):
        return None


def holder(home: Path) -> int | None:
    """The pid of the server serving ``home`` now, or None. Read from the lock file,
    never by taking the lock (a look would make a server starting at that moment fail);
    the pid counts only while it is a ``tether serve`` process."""
    pid = holder_named(home)
    if pid is None:
        return None
    try:
        command = psutil.Process(pid).cmdline()
    except psutil.Error:
        return None
    return pid if "tether" in " ".join(command) and "serve" in command else None


def release(lock: HomeLock) -> None:
    """Give one hold back; the lock goes with the last."""
    lock.holds -= 1
    if lock.holds <= 0 and _held.get(lock.key) is lock:
        del _held[lock.key]
        _close(list(lock.fds))


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
