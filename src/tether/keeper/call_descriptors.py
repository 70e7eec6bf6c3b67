"""The descriptors the runner holds for one call, each closed exactly once, here.

A descriptor number closed twice is worse than one leaked: by the second close the
kernel may have given the number to another call's pipe or pidfd, to a status file being
written, or to the /proc scan a worker thread runs for a tree kill, and those then fail
with EBADF (or "Not a directory: /proc", when the number had become a file's). That is
how a runner stopping 1,000 calls at once lost some of them: it closed the pipes with
``os.close`` while the ``Popen``'s file objects still held the numbers, and those closed
them again when they were collected, which is whenever the stopper let go of the call.

So every descriptor of a call is registered here with its owner (a pipe's file object,
or this class for a raw descriptor), is closed only through :meth:`close`, and is
forgotten before it is closed: a second close of the same number is a no-op.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import IO, Any

log = logging.getLogger(__name__)


class CallDescriptors:
    """One call's pipes, pidfd and output file, and which of them the loop watches."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        # A pipe's number belongs to its file object: closing it any other way leaves
        # the object to close the number again when it is collected.
        self._files: dict[int, IO[bytes]] = {}
        self._raw: set[int] = set()
        self._watched: set[int] = set()

    def adopt_pipe(self, pipe: IO[bytes]) -> int:
        """Take a pipe's read end (non-blocking from now on); its number."""
        fd = pipe.fileno()
        os.set_blocking(fd, False)
        self._files[fd] = pipe
        return fd

    def adopt(self, fd: int) -> int:
        """Take a descriptor nothing else owns (``os.open``, ``os.pidfd_open``)."""
        self._raw.add(fd)
        return fd

    def watch(self, fd: int, callback: Callable[..., None], *args: Any) -> None:
        """Call ``callback(*args)`` on the loop whenever ``fd`` is readable."""
        if not self.holds(fd):
            raise ValueError(f"descriptor {fd} is not this call's")
        self._loop.add_reader(fd, callback, *args)
        self._watched.add(fd)

    def holds(self, fd: int) -> bool:
        """Whether ``fd`` is still open and this call's."""
        return fd in self._files or fd in self._raw

    def close(self, fd: int) -> None:
        """Stop watching ``fd`` and close it through its owner. A number no longer held
        is left alone (it may be someone else's by now). Never raises: a failing close
        is logged, and the number is forgotten either way."""
        if fd in self._watched:
            self._watched.discard(fd)
            self._loop.remove_reader(fd)
        pipe = self._files.pop(fd, None)
        try:
            if pipe is not None:
                pipe.close()
            elif fd in self._raw:
                self._raw.discard(fd)
                os.close(fd)
        except OSError:
            log.exception("closing descriptor %d failed", fd)

    def close_all(self) -> None:
        """Close every descriptor still held."""
        for fd in [*self._files, *self._raw]:
            self.close(fd)
