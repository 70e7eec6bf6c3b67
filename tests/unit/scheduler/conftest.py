"""In-process cron fixtures: one store (`database_url`) and a clock the test moves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from datetime import UTC, datetime
from typing import Any

import pytest
from cron_parts import CronNode, FakeClock, FakeTasks, close_node, open_node


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 3, 2, 10, 1, tzinfo=UTC))


@pytest.fixture
async def node(database_url: str, clock: FakeClock) -> AsyncIterator[CronNode]:
    opened = await open_node(database_url, clock)
    try:
        yield opened
    finally:
        await close_node(opened)


@pytest.fixture
async def open_cron(database_url: str, clock: FakeClock) -> AsyncIterator[Any]:
    """Open more nodes over the same database file (another process, or a restart)."""
    opened: list[CronNode] = []

    async def open_more(tasks: FakeTasks | None = None, resumed: Collection[str] = ()) -> CronNode:
        opened.append(await open_node(database_url, clock, tasks, resumed))
        return opened[-1]

    try:
        yield open_more
    finally:
        for each in opened:
            await close_node(each)
