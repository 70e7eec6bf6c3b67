"""A move the store refuses (a full disk: a 507, "nothing of this write was kept")
leaves the call as it was. An extension moved its deadline all the same, in the
server but not in the keeper's runner, which had not been told; a move to the
background left it reading ``offloaded`` while its turn still waited on it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from coordinator_parts import coordinator_on
from test_toolcalls_offload_while_ending import OneRow

from tether.errors import OutOfStorage
from tether.toolcalls.call import Invocation
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.tools.base import RunContext, Tool, ToolResult


class FullDisk(OneRow):
    """The row, on a disk that fills once ``full`` is set (a move to the background
    answered at once)."""

    full = False

    def __init__(self) -> None:
        super().__init__()
        self.answer_offload.set()

    async def update(self, call_id: str, **values: Any) -> None:
        if self.full:
            raise OutOfStorage("the database cannot be written (database or disk is full)")
        await super().update(call_id, **values)


@pytest.fixture
async def held(tmp_path: Path) -> AsyncIterator[tuple[ToolCallCoordinator, FullDisk]]:
    """A coordinator running call ``c1`` (session ``s``, kill deadline a minute away)
    until the test ends; its store fills when told."""
    store = FullDisk()
    coordinator = coordinator_on(store, tmp_path)
    returns = asyncio.Event()

    async def run(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        await returns.wait()
        return ToolResult(summary="exit code 0")

    tool = Tool("held", "", {"type": "object"}, run, timeout_of=lambda _args: 60.0)
    inv = Invocation("c1", "s", "t1", "default", "held", {})
    running = asyncio.ensure_future(coordinator.run(inv, tool))
    while not coordinator.live_count():
        await asyncio.sleep(0.001)
    yield coordinator, store
    store.full = False
    returns.set()
    await asyncio.wait_for(running, 5)


async def test_an_extension_the_store_refuses_changes_nothing(
    held: tuple[ToolCallCoordinator, FullDisk],
) -> None:
    coordinator, store = held
    store.full = True
    with pytest.raises(OutOfStorage):
        await coordinator.extend("s", "c1", "kill", 30)
    (info,) = coordinator.list_live("s")
    assert info.kill_remaining is not None and info.kill_remaining <= 60


async def test_a_move_to_the_background_the_store_refuses_changes_nothing(
    held: tuple[ToolCallCoordinator, FullDisk],
) -> None:
    coordinator, store = held
    store.full = True
    with pytest.raises(OutOfStorage):
        await coordinator.offload("s", "c1")
    (info,) = coordinator.list_live("s")
    assert (info.status, info.offload_reason) == ("running", None)
    store.full = False
    moved = await coordinator.offload("s", "c1")
    assert (moved.status, moved.offload_reason) == ("offloaded", "user")


async def test_a_deadline_move_the_store_refuses_leaves_the_kill_deadline_standing(
    tmp_path: Path,
) -> None:
    """The offload deadline fires on a full disk: the call stays in the foreground, and
    its kill deadline still ends it (the deadline watcher died on the refusal, so the
    call ran on past its kill deadline, waited on by its turn)."""
    store = FullDisk()
    store.full = True  # from the start: nothing but the move writes before the kill
    coordinator = coordinator_on(store, tmp_path, offload_after=0.0)
    cancelled = asyncio.Event()

    async def endless(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("never reached")

    tool = Tool("endless", "", {"type": "object"}, endless, timeout_of=lambda _args: 0.2)
    inv = Invocation("c1", "s", "t1", "default", "endless", {})
    outcome = await asyncio.wait_for(coordinator.run(inv, tool), 5)
    assert cancelled.is_set()
    assert not outcome.offloaded
    assert outcome.end_state == "timeout"
    assert store.row["status"] == "completed"
    assert store.row["offload_reason"] is None
