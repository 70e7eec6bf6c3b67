"""Reads asked for in the same turn of the event loop share one trip to the store.

A model reply that asks for ten shell calls plans them together, and each plan reads
its session's sandbox settings: ten identical queries asked in the same turn of the
loop. :class:`SharedReads` answers the reads of one key asked before the shared read
has started with that one read. Once it has started, a new read starts its own, so a
read always starts after it was asked for: it sees every write committed before that
(a write that lands while the read runs may be seen or not, as with any read).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from tether.waits import unawaited_is_fine

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SharedReads(Generic[K, V]):
    """``read(key)``, with calls for one key asked in the same turn answered by one."""

    def __init__(self, read: Callable[[K], Awaitable[V]]) -> None:
        self._read = read
        self._not_started: dict[K, asyncio.Task[V]] = {}

    async def __call__(self, key: K) -> V:
        shared = self._not_started.get(key)
        if shared is None:
            shared = asyncio.create_task(self._start(key))
            shared.add_done_callback(unawaited_is_fine)
            self._not_started[key] = shared
        # One reader's cancel must not cancel the read the others wait on.
        return await asyncio.shield(shared)

    async def _start(self, key: K) -> V:
        if self._not_started.get(key) is asyncio.current_task():
            del self._not_started[key]  # reads asked from now on start their own
        return await self._read(key)
