"""Waiting with a time limit without ever losing a cancel.

On Python 3.11, ``asyncio.wait_for`` swallows a cancel that arrives in the same turn of
the event loop as the awaited result: it returns the result and the task runs on (fixed
in 3.12, whose ``wait_for`` is built on ``asyncio.timeout``). A service loop that sleeps
on its wake-up event that way, cancelled at shutdown just as something woke it, goes on
looping, and the shutdown awaiting it never returns; that hung a CI run. Tether waits
through these two instead, and ruff refuses ``asyncio.wait_for`` in ``src/`` (TID251).

And two for the other side: a write that a cancel must not cut in half, and a future
whose waiters may have given up on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, raising TimeoutError after ``seconds`` (None: no limit)."""
    async with asyncio.timeout(seconds):
        return await awaitable


async def event_within(event: asyncio.Event, seconds: float | None) -> bool:
    """Wait until ``event`` is set, ``seconds`` at most: whether it was set."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def to_the_end(awaitable: Awaitable[T]) -> T:
    """``await awaitable`` to its end even when cancelled meanwhile, once or more (a write,
    or a swap, whose half would be worse than either whole); the cancel is raised once it
    has ended. Only a cancel of the work itself (the loop closing) cuts it."""
    future = asyncio.ensure_future(awaitable)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.cancelled():
                raise
            cancelled = True
            continue
        if cancelled:
            raise asyncio.CancelledError
        return result


def unawaited_is_fine(done: asyncio.Future[Any]) -> None:
    """A done-callback for a future some waiters may have stopped awaiting (they were
    cancelled): its error is taken here, so it is not logged as never retrieved."""
    if not done.cancelled():
        done.exception()
