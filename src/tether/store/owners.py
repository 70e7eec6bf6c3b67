"""Which server owns which rows, and whether that server still lives.

Several servers may use one database (the cron tests run two on one SQLite file; a later
release runs several nodes). Each server takes an owner id at start and records it on the
tool calls, tasks and cron runs it starts. Its liveness is an exclusive ``flock`` on a
file named after the id, in a directory beside the database: the kernel drops the lock
when the process ends, however it ends (SIGKILL included), so a lock file nobody holds
is proof that its owner is gone. Start-up recovery touches only rows of owners proven
dead this way, and never signals processes another live server started.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import uuid
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

_SUFFIX = ".lock"
# Owner ids are made here (hex); anything else read from the database is never used as
# a file name.
_OWNER_ID = re.compile(r"[0-9a-f]{8,64}")


def owners_directory(database_url: str, home: Path) -> tuple[Path, bool]:
    """Where the owners of a database keep their lock files, and whether every server
    using the database necessarily keeps its file there.

    Beside a SQLite file (servers sharing the file may have different homes): complete.
    Otherwise under ``home``: a server with another home, or on another machine, keeps
    its file elsewhere, so an owner without a file here may well be alive (database
    leases, a later release, will tell).
    """
    if database_url.startswith("sqlite"):
        path = database_url.split("///", 1)[-1]
        if path and path != ":memory:":
            db_file = Path(path)
            return db_file.parent / f"{db_file.name}.owners", True
        return home / "owners", True  # an in-memory database has one user
    return home / "owners", False


class OwnerLock:
    """This server's owner id, held alive by an exclusive lock on its file."""

    def __init__(self, directory: Path, owner_id: str, fd: int, complete: bool) -> None:
        self.directory = directory
        self.id = owner_id
        #: Every server using the database keeps its lock file in ``directory``, so an
        #: owner without one is gone (see :func:`owners_directory`).
        self.complete = complete
        self._fd: int | None = fd

    @classmethod
    def claim(cls, directory: Path, complete: bool = True) -> OwnerLock:
        """Take a fresh owner id and lock its file (blocking I/O: call it in a thread)."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        owner_id = uuid.uuid4().hex[:16]
        # Locked under a name no other server looks at, then renamed into place (the
        # lock stays with the file): a server starting at the same moment never sees
        # this file unlocked, so never takes this owner for dead. os.open makes the
        # descriptor non-inheritable: a tool's process must not keep the lock (and so
        # the owner) alive after the server has gone.
        claiming = directory / f".{owner_id}.claiming"
        fd = os.open(claiming, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{os.getpid()}\n".encode())
        claiming.rename(directory / f"{owner_id}{_SUFFIX}")
        return cls(directory, owner_id, fd, complete)

    @property
    def marker_prefix(self) -> str:
        """The prefix of the marker put in the environment of every process this owner
        starts, so that only a dead owner's processes are found by it."""
        return self.marker_prefix_of(self.id)

    @staticmethod
    def marker_prefix_of(owner: str) -> str:
        """The marker prefix of ``owner``'s processes (followed by ``:<call id>``)."""
        return f"tether-{owner}"

    def dead_among(self, owners: Iterable[str | None]) -> set[str | None]:
        """The owners among ``owners`` that are provably gone.

        An owner without a lock file (and ``None``: rows written before owners were
        recorded) counts as gone only if the directory is complete. This owner is never
        gone.
        """
        return {o for o in owners if o != self.id and self._is_dead(o)}

    def abandoned(self) -> set[str]:
        """Owners whose lock file is still here but held by nobody (crashed servers)."""
        found = {p.name.removesuffix(_SUFFIX) for p in self.directory.glob(f"*{_SUFFIX}")}
        return {o for o in found if o != self.id and self._is_dead(o)}

    def forget(self, owners: Iterable[str | None]) -> None:
        """Remove the lock files of dead owners once their rows are recovered."""
        for owner in owners:
            if owner is not None and owner != self.id and _OWNER_ID.fullmatch(owner):
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / f"{owner}{_SUFFIX}").unlink()

    def release(self, left_unfinished: bool = False) -> None:
        """Give the id up at a clean shutdown.

        ``left_unfinished``: rows of ours stay unfinished on purpose (the keeper's
        detached calls and their tasks), for a successor to take up. The file then
        stays, unlocked: on a directory that is not complete a missing file proves
        nothing, and the successor would take this owner for alive elsewhere and
        leave its tasks waiting forever. A free lock proves it gone everywhere.
        """
        if self._fd is None:
            return
        if not left_unfinished:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{self.id}{_SUFFIX}").unlink()
        os.close(self._fd)
        self._fd = None

    def _is_dead(self, owner: str | None) -> bool:
        if owner is None or not _OWNER_ID.fullmatch(owner):
            # Written before owners had lock files (or not by Tether): no file to look at.
            return self.complete
        return _lock_is_free(self.directory / f"{owner}{_SUFFIX}", self.complete)


def _lock_is_free(path: Path, missing: bool) -> bool:
    """Whether nobody holds the lock on ``path`` (``missing`` if there is no file)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return missing
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing also drops the lock if we took it
    return True


def owned_by(
    column: sa.ColumnElement[Any], owners: Collection[str | None]
) -> sa.ColumnElement[bool]:
    """A WHERE clause: ``column`` holds one of ``owners`` (``None``: no owner recorded)."""
    named = [o for o in owners if o is not None]
    clauses = [column.in_(named)] if named else []
    if None in owners:
        clauses.append(column.is_(None))
    return sa.or_(sa.false(), *clauses)
