"""The runner's socket: listening on it (again, when a cleaner removed it) and turning
away peers that may not use it (see peers.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tether.keeper import protocol

if TYPE_CHECKING:
    from tether.keeper.runner import Runner

log = logging.getLogger(__name__)

# Refused connections are logged at most this often (seconds).
_REFUSAL_LOG_INTERVAL = 60.0


def refuse(writer: asyncio.StreamWriter, why: str) -> None:
    """Tell a peer that may not send requests why, and hang up at once (a flood of them
    must not hold descriptors); the log says so once a minute, with how many."""
    _refusals.note(why)
    with contextlib.suppress(ConnectionError):
        writer.write(protocol.encode({"ok": False, "error": f"refused: {why}"}))
    writer.close()


class _Refusals:
    """Refused connections, logged at most once a minute (a call may flood them)."""

    def __init__(self) -> None:
        self._since_logged = 0
        self._logged_at = -_REFUSAL_LOG_INTERVAL

    def note(self, why: str) -> None:
        self._since_logged += 1
        now = time.monotonic()
        if now - self._logged_at >= _REFUSAL_LOG_INTERVAL:
            log.warning(
                "refused %d connection(s) to the runner in the last minute; the latest: %s",
                self._since_logged,
                why,
            )
            self._since_logged, self._logged_at = 0, now


_refusals = _Refusals()


async def listen(runner: Runner, sock: Path) -> None:
    """Listen on ``sock``, replacing whatever is there (this runner holds the home's
    lock: a file there is a dead runner's, or no socket at all)."""
    _remove(sock)
    runner.listening = await asyncio.start_unix_server(
        runner.handle, path=sock, limit=protocol.MAX_LINE
    )
    runner.socket_id = _owner_only(sock)


async def listen_again(runner: Runner, sock: Path) -> None:
    """Listen anew if the socket file is no longer the one this runner made (removed,
    or replaced); the old listener stops taking connections, open ones go on."""
    if runner.done.is_set() or _file_id(sock) == runner.socket_id:
        return
    log.warning("the socket %s was removed or replaced; listening there again", sock)
    old = runner.listening
    try:
        await listen(runner, sock)
    except OSError:
        log.exception("listening on %s again failed", sock)
        return
    if old is not None:
        old.close()


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _owner_only(sock: Path) -> tuple[int, int] | None:
    """Make the socket the runner's user's alone; its file id."""
    sock.chmod(0o600)
    return _file_id(sock)


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino
