"""Waiting with a time limit without ever losing a cancel.

On Python 3.11, ``asyncio.wait_for`` swallows a cancel that arrives in the same turn of
the event loop as the awaited result: it returns the result and the task runs on (fixed
in 3.12, whose ``wait_for`` is built on ``asyncio.timeout``). A service loop that sleeps
on its wake-up event that way, cancelled at shutdown just as something woke it, goes on
looping, and the shutdown awaiting it never returns; that hung a CI run. Tether waits
through these two instead, and ruff refuses ``asyncio.wait_for`` in ``src/`` (TID251).

And two for the other side: a write that a cancel must not cut in half, and a future
whose waiters may have given up on it. Last, a stream and a request that end when the
server exits, and a wait for the first of several events (a feed's next event, or the
exit).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
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


async def any_set(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def unawaited_is_fine(done: asyncio.Future[Any]) -> None:
    """A done-callback for a future some waiters may have stopped awaiting (they were
    cancelled): its error is taken here, so it is not logged as never retrieved."""
    if not done.cancelled():
        done.exception()


async def unless_set(event: asyncio.Event, awaitable: Awaitable[T]) -> T | None:
    """``await awaitable``, unless ``event`` is set first: it is then cancelled, and
    what it returns despite the cancel is returned (None if it let the cancel through).
    A cancel of the caller cancels it too, as a plain await would: a request that must
    not hold a server's exit."""
    work = asyncio.ensure_future(awaitable)
    stop = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        raise
    finally:
        stop.cancel()
    if not work.done():
        work.cancel()
    try:
        return await work
    except asyncio.CancelledError:
        if not work.cancelled():
            raise  # the caller's own cancel, while the work wound down
        return None


async def until_set(event: asyncio.Event, source: AsyncIterator[T]) -> AsyncIterator[T]:
    """The items of ``source`` until it ends or ``event`` is set, whichever comes first
    (then ``source`` is closed): a stream that must not hold a server's exit."""
    stop = asyncio.ensure_future(event.wait())
    step: asyncio.Future[T] | None = None
    try:
        while not event.is_set():
            step = asyncio.ensure_future(_next(source))
            await asyncio.wait({step, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                return
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        stop.cancel()
        # The source is closed only once no step of it runs (cut by the event, or by a
        # cancel of this stream: its client went away).
        if step is not None and not step.done():
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await step
        closing = getattr(source, "aclose", None)
        if closing is not None:
            await closing()


async def _next(source: AsyncIterator[T]) -> T:
    # Not ``anext(source)`` itself as the task: on Python 3.11 a task cancelled before
    # it starts leaves that awaitable unstarted, and the generator then refuses its
    # ``aclose`` as "already running".
    return await anext(source)
