"""Writing an end that must land: a task's result, a tool call's end.

Such a write failing once (a full disk: SQLite's "database or disk is full"; PostgreSQL
restarting) used to be the end of it: the task read ``running`` for good, its call
stayed listed live, though the disk was freed a minute later. Nothing else would ever
write them (only the next start's recovery ends what a previous run left). So these
writes are tried again until the store takes them, or the server stops. Only failures
a later attempt may not meet are tried again (``PASSING``): any other is a fault of the
write itself, raised at once (tried for ever, it would keep the call listed for good).

:class:`StoreLater` does the trying in the background, for an end whose writer must
go on meanwhile (a call's end: the turn waits on it; a cron run's: a stop or an exit
must not wait for the disk).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import sqlalchemy as sa

from tether.errors import OutOfStorage

T = TypeVar("T")

#: Failures that may pass: the storage full or read-only, the database restarting or
#: out of reach.
PASSING: tuple[type[Exception], ...] = (
    OutOfStorage,
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    OSError,
)
log = logging.getLogger(__name__)

#: The first wait after a failure, doubled after each further one up to the last.
FIRST_WAIT = 0.25
LAST_WAIT = 5.0


async def until_stored(write: Callable[[], Awaitable[T]], what: str) -> T:
    """Run ``write`` until it returns (what it returns). Each failure that may pass is
    logged (the first with its traceback, the next ones in a line) and followed by a
    wait; any other is raised. A cancel stops it."""
    wait = FIRST_WAIT
    failures = 0
    while True:
        try:
            done = await write()
        except PASSING as exc:
            failures += 1
            if failures == 1:
                log.exception("storing %s failed; trying again until it is stored", what)
            else:
                log.warning("storing %s failed again (%d times): %s", what, failures, exc)
        else:
            if failures:
                log.info("stored %s after %d failed attempt(s)", what, failures)
            return done
        await asyncio.sleep(wait)
        wait = min(wait * 2, LAST_WAIT)


class StoreLater:
    """Ends tried once now and, if the store refuses them for a while, again in the
    background (:func:`until_stored`) until it takes them or :meth:`give_up`."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    async def store(
        self,
        write: Callable[[], Awaitable[Any]],
        what: str,
        then: Callable[[], object] | None = None,
    ) -> bool:
        """Try ``write`` once; True if it was stored now. A failure that may pass leaves
        it to the background (any other is raised). ``then`` runs once it is stored,
        now or later."""
        try:
            await write()
        except PASSING as exc:
            log.warning("storing %s failed (%s); trying again in the background", what, exc)
            task = asyncio.create_task(self._until_stored(write, what, then))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return False
        if then is not None:
            then()
        return True

    @staticmethod
    async def _until_stored(
        write: Callable[[], Awaitable[Any]], what: str, then: Callable[[], object] | None
    ) -> None:
        try:
            await until_stored(write, what)
        except Exception:
            log.exception("storing %s failed on an error that will not pass; given up", what)
            return
        if then is not None:
            then()

    async def settled(self) -> None:
        """Wait until every write left to the background has been stored (or has
        failed for good, or been given up)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def give_up(self) -> None:
        """At an exit: stop trying (the next start's recovery ends what they were for)."""
        for task in list(self._tasks):
            task.cancel()
