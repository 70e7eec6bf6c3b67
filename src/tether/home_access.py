"""Whether this user can use what TETHER_HOME holds, checked before a server starts.

A home restored from a backup as another user, or with its modes lost, failed deep in
the start: a 200-line SQLAlchemy traceback for the database, another through uvicorn's
lifespan for the call directory or the key file, after the runner had been started. The
operator needs one line naming the file, its mode and its owner.

Only the home and what is directly in it are looked at (a stat each): everything there
is Tether's, and a restore changes a whole tree at once. The workspace's contents are
the user's and are not looked at.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Files Tether only reads once written: they need not be writable (an operator may
#: well make the token read-only).
_READ_ONLY = frozenset({"token", "secret.key"})
_WORDS = ((os.R_OK, "read"), (os.W_OK, "write"), (os.X_OK, "search"))
#: How many unusable entries the refusal names.
_NAMED = 3


def _needs(entry: Path) -> int | None:
    """The access Tether needs to ``entry`` (os.R_OK...), None for what it never opens
    as a file or a directory (the runner's socket, a link)."""
    mode = entry.lstat().st_mode
    if stat.S_ISDIR(mode):
        return os.R_OK | os.W_OK | os.X_OK
    if stat.S_ISREG(mode):
        return os.R_OK if entry.name in _READ_ONLY else os.R_OK | os.W_OK
    return None


def _unusable(path: Path, needed: int) -> str | None:
    """How ``path`` falls short of ``needed``, or None if this user has that access."""
    if os.access(path, needed, effective_ids=True, follow_symlinks=False):
        return None
    info = path.lstat()
    words = [w for bit, w in _WORDS if needed & bit]
    where = " on a read-only file system" if os.statvfs(path).f_flag & os.ST_RDONLY else ""
    return (
        f"{path} (mode {stat.S_IMODE(info.st_mode):03o}, owner uid {info.st_uid}{where}) "
        f"needs {' and '.join(words)}"
    )


def problems(home: Path) -> list[str]:
    """What in ``home`` (itself included) this user cannot use as Tether needs to, each
    as a phrase naming the path, its mode and its owner. Empty for a home not made yet."""
    if not home.is_dir():
        return []
    found = [p for p in [_unusable(home, os.R_OK | os.W_OK | os.X_OK)] if p]
    if found:
        return found  # what is inside cannot be judged (or even listed)
    for entry in home.iterdir():
        try:
            needed = _needs(entry)
            problem = None if needed is None else _unusable(entry, needed)
        except FileNotFoundError:
            continue  # gone meanwhile: nothing to use
        if problem is not None:
            found.append(problem)
    return sorted(found)


def refusal(home: Path, doing: str = "refusing to start") -> str | None:
    """One line saying why ``home`` cannot be used (after ``doing``), or None when it
    can."""
    found = problems(home)
    if not found:
        return None
    more = f"; and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
    return (
        f"{doing}: TETHER_HOME {home} holds what this user (uid {os.geteuid()}) "
        f"cannot use: {'; '.join(found[:_NAMED])}{more}. Restore the owner and modes "
        "(say, chown -R and chmod -R u+rwX on the home), or run Tether as their owner."
    )
