"""Background tasks the coordinator starts and must keep a reference to."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


class OwnedTasks:
    """Keeps each task alive until it ends (asyncio holds only weak references)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task owned here."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
