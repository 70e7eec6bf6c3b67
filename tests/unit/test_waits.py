"""Waiting with a time limit (tether.waits): a cancel that arrives in the same turn of the
event loop as the awaited event is never lost, which ``asyncio.wait_for`` on 3.11 does;
and work awaited to its end whatever cancels its waiter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tether.waits import event_within, to_the_end, unless_set, until_set, within


async def _parked(event: asyncio.Event) -> asyncio.Task[bool]:
    """A task waiting on ``event`` through event_within, once it is waiting."""
    task = asyncio.create_task(event_within(event, 3600))
    for _ in range(5):  # no I/O in between: the task is parked after a few turns
        await asyncio.sleep(0)
    return task


async def test_a_cancel_that_arrives_with_the_event_is_not_lost() -> None:
    event = asyncio.Event()
    task = await _parked(event)
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_event_within_says_whether_the_event_came() -> None:
    event = asyncio.Event()
    assert await event_within(event, 0.01) is False
    asyncio.get_running_loop().call_soon(event.set)
    assert await event_within(event, None) is True


async def test_within_returns_the_result_or_times_out() -> None:
    assert await within(asyncio.sleep(0, "done"), 1) == "done"
    never = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await within(never, 0.01)
    assert never.cancelled()


async def test_work_awaited_to_the_end_outlasts_repeated_cancels() -> None:
    release, done = asyncio.Event(), []

    async def work() -> None:
        await release.wait()
        done.append(True)

    waiter = asyncio.create_task(to_the_end(work()))
    for _ in range(3):  # a stopped turn, then a shutdown, then another
        await asyncio.sleep(0)
        waiter.cancel()
    await asyncio.sleep(0)
    assert not waiter.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert done == [True]


async def test_a_stream_ends_when_the_event_is_set_and_its_source_is_closed() -> None:
    event, closed, waiting = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def source() -> AsyncIterator[int]:
        try:
            yield 1
            waiting.set()
            await asyncio.Event().wait()  # a quiet stream
            yield 2
        finally:
            closed.set()

    got = []

    async def consume() -> None:
        async for item in until_set(event, source()):
            got.append(item)

    consuming = asyncio.create_task(consume())
    await waiting.wait()
    event.set()
    await asyncio.wait_for(consuming, 5)
    assert got == [1] and closed.is_set()


async def test_a_stream_cancelled_while_it_waits_closes_its_source() -> None:
    closed, waiting = asyncio.Event(), asyncio.Event()

    async def source() -> AsyncIterator[int]:
        try:
            waiting.set()
            await asyncio.Event().wait()
            yield 1
        finally:
            closed.set()

    async def consume() -> None:
        async for _ in until_set(asyncio.Event(), source()):
            pass

    consuming = asyncio.create_task(consume())
    await waiting.wait()
    consuming.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consuming
    assert closed.is_set()


async def test_work_unless_set_gives_its_result_or_is_cancelled_by_the_event() -> None:
    event = asyncio.Event()
    assert await unless_set(event, asyncio.sleep(0, "done")) == "done"
    cancelled = asyncio.Event()

    async def forever() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    waiting = asyncio.ensure_future(unless_set(event, forever()))
    await asyncio.sleep(0)
    event.set()
    assert await waiting is None
    assert cancelled.is_set()


async def test_work_unless_set_may_answer_its_cancel_with_a_result() -> None:
    event = asyncio.Event()

    async def winds_down() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "stopped cleanly"
        return "never"

    waiting = asyncio.ensure_future(unless_set(event, winds_down()))
    await asyncio.sleep(0)
    event.set()
    assert await waiting == "stopped cleanly"


async def test_a_cancel_of_the_caller_reaches_the_work_unless_set() -> None:
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    waiting = asyncio.ensure_future(unless_set(asyncio.Event(), forever()))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert cancelled.is_set()
