"""Writing an end that must land: a task's result, a tool call's end.

Such a write failing once (a full disk: SQLite's "database or disk is full"; PostgreSQL
restarting) used to be the end of it: the task read ``running`` for good, its call
stayed listed live, though the disk was freed a minute later. Nothing else would ever
write them (only the next start's recovery ends what a previous run left). So these
writes are tried again until the store takes them, or the server stops. Only failures
a later attempt may not meet are tried again (``PASSING``): any other is a fault of the
write itself, raised at once (tried for ever, it would keep the call listed for good).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

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
