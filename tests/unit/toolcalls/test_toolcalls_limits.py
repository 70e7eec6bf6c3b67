"""Call limits under a burst: calls started together get exactly the limit admitted.

The agent starts every call of a model reply at once (``asyncio.gather``); each limit
must be checked and taken in one step, or all of them pass the check together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from coordinator_parts import no_delivery, small_config

from tether.toolcalls.call import Invocation
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.tools.base import RunContext, Tool, ToolInputError, ToolResult


class SlowWritingStore:
    """A call store whose every write yields to the loop, as a real database does."""

    async def insert(self, record: Any) -> None:
        await asyncio.sleep(0)

    async def update(self, call_id: str, **values: Any) -> None:
        await asyncio.sleep(0)

    async def record_end(self, call_id: str, **values: Any) -> bool:
        await asyncio.sleep(0)
        return True

    async def append_output(self, call_id: str, chunks: Any) -> None:
        await asyncio.sleep(0)


def _coordinator(tmp_path: Path, per_session: int, total: int) -> ToolCallCoordinator:
    config = small_config(max_per_session=per_session, max_total=total)
    return ToolCallCoordinator(SlowWritingStore(), config, tmp_path, (), no_delivery)  # type: ignore[arg-type]


async def _burst(
    coordinator: ToolCallCoordinator, sessions: list[str]
) -> tuple[list[asyncio.Future[Any]], asyncio.Event]:
    """Start one held call per entry of ``sessions`` at once; returns the runs and the
    event that lets the admitted ones end."""
    release = asyncio.Event()

    async def held(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        await release.wait()
        return ToolResult()

    tool = Tool("held", "", {"type": "object"}, held)
    runs = [
        asyncio.ensure_future(
            coordinator.run(Invocation(f"c{i}", sid, "t1", "default", "held", {}), tool)
        )
        for i, sid in enumerate(sessions)
    ]
    return runs, release


async def _refused_and_running(
    runs: list[asyncio.Future[Any]], expected_refusals: int
) -> tuple[int, int]:
    """Wait (with a deadline) until ``expected_refusals`` runs have ended, then count."""
    async with asyncio.timeout(5):
        while sum(r.done() for r in runs) < expected_refusals:
            await asyncio.wait([r for r in runs if not r.done()], return_when="FIRST_COMPLETED")
    refused = 0
    for run in runs:
        if run.done():
            with pytest.raises(ToolInputError, match="too many tool calls are in flight"):
                run.result()
            refused += 1
    return refused, len(runs) - refused


async def test_a_burst_in_one_session_gets_exactly_the_session_limit(tmp_path: Path) -> None:
    coordinator = _coordinator(tmp_path, per_session=2, total=100)
    runs, release = await _burst(coordinator, ["s1"] * 7)
    refused, running = await _refused_and_running(runs, 5)
    assert (refused, running) == (5, 2)
    assert len(coordinator.list_live("s1")) == 2
    release.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 5)
    assert sum(getattr(o, "end_state", None) == "success" for o in outcomes) == 2


async def test_a_burst_across_sessions_gets_exactly_the_server_limit(tmp_path: Path) -> None:
    coordinator = _coordinator(tmp_path, per_session=2, total=3)
    sessions = [f"s{i}" for i in range(8)]
    runs, release = await _burst(coordinator, sessions)
    refused, running = await _refused_and_running(runs, 5)
    assert (refused, running) == (5, 3)
    assert sum(len(coordinator.list_live(s)) for s in sessions) == 3
    release.set()
    await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 5)
    # Places free up once calls end.
    runs, release = await _burst(coordinator, sessions[:3])
    release.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*runs), 5)
    assert [o.end_state for o in outcomes] == ["success"] * 3
