"""One server per ``TETHER_HOME``: two would both adopt (and finish) the same calls."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

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


def release(fd: int) -> None:
    """Give the lock back."""
    with contextlib.suppress(OSError):
        os.close(fd)
