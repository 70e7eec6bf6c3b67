"""A task's event feed: kept for replay, fanned out to live subscribers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

_MAX_KEPT = 10_000


class EventFeed:
    """Events of one task, numbered; subscribers get the past then the live ones."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self.closed = False

    def emit(self, event: dict[str, Any]) -> None:
        if self.closed:
            return
        # Output chunks are the bulk; drop them from the replay log first if it grows.
        if len(self._events) >= _MAX_KEPT:
            self._events = [e for e in self._events if e["type"] != "tool_call_output"]
        self._events.append(event)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self) -> AsyncIterator[dict[str, Any]]:
        sent = 0
        while True:
            while sent < len(self._events):
                sent += 1
                yield self._events[sent - 1]
            if self.closed:
                return
            await self._changed.wait()
