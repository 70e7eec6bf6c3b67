"""Reads that overlap in time share one trip to the store.

A model reply that asks for ten shell calls plans them together, and each plan reads
its session's sandbox settings: ten identical queries in the same few hundred
microseconds. :class:`SharedReads` lets a read of a key that is already under way wait
for that one instead of starting its own. Nothing is kept once a read is done, so a
read never sees a value older than one that started after it was asked for: a write
that lands while a shared read is in flight is seen from the next read on, as it would
be by a read of its own that had started a moment earlier.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SharedReads(Generic[K, V]):
    """``read(key)``, with concurrent calls for one key answered by a single read."""

    def __init__(self, read: Callable[[K], Awaitable[V]]) -> None:
        self._read = read
        self._under_way: dict[K, asyncio.Future[V]] = {}

    async def __call__(self, key: K) -> V:
        pending = self._under_way.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._read(key))
            self._under_way[key] = pending
            pending.add_done_callback(lambda done: self._settle(key, done))
        # One reader's cancel must not cancel the read the others wait on.
        return await asyncio.shield(pending)

    def _settle(self, key: K, done: asyncio.Future[V]) -> None:
        if self._under_way.get(key) is done:
            del self._under_way[key]
        if not done.cancelled():
            done.exception()  # retrieved here, so one nobody awaited any more is not logged
