"""Opening a checked path so that what is opened is what was checked.

:func:`tether.tools.confinement.confine` resolves a path and checks it. A process that
can write in the workspace (a background shell call) may swap a directory of that path
for a symlink between the check and the open, and the open would follow it (into
TETHER_HOME, say). So the checked path, which has no symlink left in it, is opened one
component at a time, each relative to the directory opened before and never following
a symlink: a component swapped since the check makes the open fail instead. The file
itself must be a regular file (a FIFO would block the worker thread for ever), and stays
non-blocking: a file of /proc that waits for data (``kmsg``) fails at once instead of
holding a worker thread. Blocking (file system calls): run in a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from tether.tools.base import ToolInputError

_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_file(path: Path, flags: int, *, create_dirs: bool = False) -> int:
    """A descriptor of the regular file at the resolved ``path``, opened with ``flags``
    (``os.O_RDONLY``, ``os.O_WRONLY | os.O_CREAT``, ...); ``create_dirs`` makes missing
    directories on the way. ToolInputError if anything on the path is not what was
    checked (a symlink, a file for a directory) or the file is not a regular file."""
    if not path.is_absolute() or path.name in ("", ".", ".."):
        raise ToolInputError(f"{path} is not a file path")
    parent = _open_dir(path.parent, create_dirs)
    try:
        try:
            fd = os.open(path.name, flags | _FILE_FLAGS, 0o666, dir_fd=parent)
        except OSError as exc:
            raise _refusal(path, exc) from None
    finally:
        os.close(parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolInputError(f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_dir(directory: Path, create: bool) -> int:
    fd = os.open("/", _DIR_FLAGS)
    try:
        for name in directory.parts[1:]:
            try:
                step = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise ToolInputError(f"{directory} does not exist") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                step = _open_step(directory, name, fd)
            except OSError as exc:
                raise _refusal(directory, exc) from None
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_step(directory: Path, name: str, parent: int) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _refusal(directory, exc) from None


def _refusal(path: Path, exc: OSError) -> ToolInputError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _has_link(path):
        return ToolInputError(f"{path} changed while it was being opened (a link appeared)")
    if exc.errno == errno.ENOTDIR:
        return ToolInputError(f"{path}: a part of it is a file, not a directory")
    if exc.errno == errno.ENXIO:
        return ToolInputError(f"{path} is not a regular file")
    return ToolInputError(f"{path}: {exc.strerror}")


def _has_link(path: Path) -> bool:
    """Whether some part of ``path`` is a symbolic link now (a swap the walk refused)."""
    return any(part.is_symlink() for part in (path, *path.parents))
