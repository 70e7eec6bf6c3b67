"""Reads asked for together share one trip (tether.shared_reads)."""

from __future__ import annotations

import asyncio

import pytest

from tether.shared_reads import SharedReads


class Store:
    """A value per key behind a read that waits until released."""

    def __init__(self) -> None:
        self.values = {"a": 1, "b": 2}
        self.reads: list[str] = []
        self.release = asyncio.Event()
        self.fail: Exception | None = None

    async def read(self, key: str) -> int:
        self.reads.append(key)
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return self.values[key]


async def _started(store: Store, count: int) -> None:
    while len(store.reads) < count:
        await asyncio.sleep(0)


async def test_overlapping_reads_of_one_key_make_one_read() -> None:
    store = Store()
    shared = SharedReads(store.read)
    readers = [asyncio.create_task(shared("a")) for _ in range(10)]
    other = asyncio.create_task(shared("b"))
    await _started(store, 2)
    store.release.set()
    assert await asyncio.gather(*readers) == [1] * 10
    assert await other == 2
    assert sorted(store.reads) == ["a", "b"]


async def test_a_read_asked_after_one_ended_reads_again_and_sees_a_later_write() -> None:
    store = Store()
    store.release.set()
    shared = SharedReads(store.read)
    assert await shared("a") == 1
    store.values["a"] = 5
    assert await shared("a") == 5
    assert store.reads == ["a", "a"]


async def test_a_read_asked_once_the_shared_one_started_sees_a_write_made_since() -> None:
    store = Store()
    shared = SharedReads(store.read)
    first = asyncio.create_task(shared("a"))
    await _started(store, 1)  # the shared read is under way, with the old value
    store.values["a"] = 5  # a write commits, then a read is asked for
    second = asyncio.create_task(shared("a"))
    await _started(store, 2)
    store.release.set()
    assert await second == 5
    assert store.reads == ["a", "a"]
    await first


async def test_one_reader_cancelled_leaves_the_others_their_answer() -> None:
    store = Store()
    shared = SharedReads(store.read)
    first = asyncio.create_task(shared("a"))
    second = asyncio.create_task(shared("a"))
    await _started(store, 1)
    first.cancel()
    store.release.set()
    assert await second == 1
    with pytest.raises(asyncio.CancelledError):
        await first
    assert store.reads == ["a"]


async def test_a_failed_read_fails_every_reader_and_the_next_read_tries_again() -> None:
    store = Store()
    store.fail = OSError("store gone")
    shared = SharedReads(store.read)
    readers = [asyncio.create_task(shared("a")) for _ in range(3)]
    await _started(store, 1)
    store.release.set()
    results = await asyncio.gather(*readers, return_exceptions=True)
    assert [str(r) for r in results] == ["store gone"] * 3
    store.fail = None
    assert await shared("a") == 1
    assert store.reads == ["a", "a"]
