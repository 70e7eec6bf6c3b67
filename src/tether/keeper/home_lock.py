"""One server per ``TETHER_HOME``: two would both adopt (and finish) the same calls."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import psutil

from tether.keeper import layout


class HomeInUse(Exception):
    """Another live server holds this home."""


def hold(home: Path) -> int:
    """Take the home's server lock (held until :func:`release` or the process ends,
    ``kill -9`` included: the kernel drops a dead process's flock). Raises HomeInUse
    naming the holder's pid."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = layout.server_lock(home)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise HomeInUse(
            f"another Tether server (pid {holder}) already serves {home}; two servers on "
            "one TETHER_HOME would both adopt its tool calls. Stop it, or use another "
            "TETHER_HOME."
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def holder(home: Path) -> int | None:
    """The pid of the server serving ``home`` now, or None. Read from the lock file,
    never by taking the lock (a look would make a server starting at that moment fail);
    the pid counts only while it is a ``tether serve`` process."""
    try:
        pid = int(layout.server_lock(home).read_text().strip())
        command = psutil.Process(pid).cmdline()
    except (OSError, ValueError, psutil.Error):
        return None
    return pid if "tether" in " ".join(command) and "serve" in command else None


def release(fd: int) -> None:
    """Give the lock back."""
    with contextlib.suppress(OSError):
        os.close(fd)
