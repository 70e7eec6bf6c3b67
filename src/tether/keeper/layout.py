"""Where the keeper keeps things under ``TETHER_HOME``, and how files are replaced."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

# A unix socket path longer than this does not fit in sockaddr_un (108 bytes with NUL).
_MAX_SOCKET_PATH = 100

OUTPUT_NAME = "output"
STATUS_NAME = "status.json"
SPEC_NAME = "call.json"


def calls_dir(home: Path) -> Path:
    """The directory holding one directory per call."""
    return home / "calls"


def call_dir(home: Path, call_id: str) -> Path:
    """The directory of one call; the id is checked so it cannot name another path."""
    if not call_id or "/" in call_id or call_id in (".", "..") or "\x00" in call_id:
        raise ValueError(f"unusable call id {call_id!r}")
    return calls_dir(home) / call_id


def runner_file(home: Path) -> Path:
    """The runner's identity (pid, process start time, protocol, version)."""
    return home / "runner.json"


def runner_lock(home: Path) -> Path:
    """Held (flock) by the live runner: at most one runner per home."""
    return home / "runner.lock"


def runner_log(home: Path) -> Path:
    """Where a detached runner writes its log."""
    return home / "runner.log"


def server_lock(home: Path) -> Path:
    """Held (flock) by the live server: at most one server adopts a home's calls."""
    return home / "server.lock"


def socket_path(home: Path) -> Path:
    """The runner's socket: under ``home`` when the path fits, else a per-home name in
    the temporary directory (deep homes, as in tests, exceed the 108-byte limit)."""
    inside = home.resolve() / "runner.sock"
    if len(str(inside)) <= _MAX_SOCKET_PATH:
        return inside
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"tether-{os.getuid()}-{digest}.sock"


class Unreadable(Exception):
    """A file of the keeper's that is there but cannot be read as one: a FIFO, a link,
    a directory, larger than its kind ever is, or a read that failed."""

    def __init__(self, path: Path, why: str) -> None:
        self.path, self.why = path, why
        super().__init__(f"{path}: {why}")


def read_file(path: Path, limit: int, offset: int = 0, most: int | None = None) -> bytes | None:
    """Up to ``limit`` bytes of the keeper's file ``path`` from ``offset``; None when
    there is no such file. Only a regular file is read, of at most ``most`` bytes when
    given: a link is not followed (it may point anywhere) and the open never blocks (a
    FIFO in its place hung a worker thread, and so the server's stop). Unreadable
    otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Unreadable(path, exc.strerror or str(exc)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(path, "not a regular file")
        if most is not None and info.st_size > most:
            raise Unreadable(path, f"larger than {most} bytes")
        return os.pread(fd, limit, offset)
    except OSError as exc:
        raise Unreadable(path, exc.strerror or str(exc)) from exc
    finally:
        os.close(fd)


def write_atomically(path: Path, data: dict[str, Any], room: Path | None = None) -> None:
    """Write JSON to ``path`` so a reader sees the old file or the new, never a part:
    a temporary file in the same directory, renamed over it. ``room``, when given and
    there, is that file: one made earlier by :func:`make_room`, written over, so the
    write needs no more of the disk than it already has (it may be full by now).

    Not fsync'd: the failures this guards against are processes dying (the server, the
    runner), after which the page cache still holds the file; a power loss ends every
    call anyway. An fsync costs ~10 ms here, which a call's start cannot afford.
    """
    body = json.dumps(data).encode()
    tmp, fd = _open_for_writing(path, room)
    try:
        try:
            written = 0
            while written < len(body):
                written += os.write(fd, body[written:])
            os.ftruncate(fd, len(body))  # what is left of the room
        finally:
            os.close(fd)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a part, or the room it could not fill
        raise


def _open_for_writing(path: Path, room: Path | None) -> tuple[Path, int]:
    """The file :func:`write_atomically` writes before renaming it to ``path``, open."""
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    if room is not None:
        try:
            return room, os.open(room, flags)
        except FileNotFoundError:
            pass  # none was kept (a call started by an older runner)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    return tmp, os.open(tmp, flags | os.O_CREAT | os.O_TRUNC, 0o666)


def make_room(path: Path, size: int) -> None:
    """Take ``size`` bytes of the disk now, as the file ``path``, for
    :func:`write_atomically` to write into later."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(b" " * size)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
