"""A move to the background asked just as the call's tool returns: the turn takes the
result itself, and the record says so. It kept ``offload_reason: "user"`` (stored by
the move, whose write was still under way when the tool returned) on a result the turn
got directly."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coordinator_parts import coordinator_on, launching_tool
from test_toolcalls_stop_while_ending import Launcher, RecordingStore

from tether.toolcalls.call import CallInfo, Invocation
from tether.toolcalls.errors import ToolCallConflict
from tether.tools.base import RunContext, Tool, ToolResult


class OneRow:
    """The call's row, written as the database would: an ended row stays as it is. The
    write of the move to the background is committed at once, but its answer is held
    until ``answer_offload`` is set."""

    def __init__(self) -> None:
        self.row: dict[str, Any] = {}
        self.offload_committed = asyncio.Event()
        self.answer_offload = asyncio.Event()

    def _write(self, values: Mapping[str, Any]) -> None:
        if self.row.get("status") != "completed":
            self.row.update(values)

    async def insert(self, record: Any) -> None:
        self.row = {"status": record.status, "offload_reason": record.offload_reason}

    async def update(self, call_id: str, **values: Any) -> None:
        self._write({k: v for k, v in values.items() if k != "session_id"})
        if values.get("status") == "offloaded":
            self.offload_committed.set()
            await self.answer_offload.wait()

    async def record_end(self, call_id: str, **values: Any) -> bool:
        self._write({"status": "completed", **values})
        return True

    async def append_output(self, call_id: str, chunks: Any) -> None:
        return None


class Ended:
    """Observer: the call's info as the chat stream is told of its end."""

    def __init__(self) -> None:
        self.info: CallInfo | None = None

    def started(self, info: CallInfo) -> None: ...
    def output(self, call_id: str, chunk: Any) -> None: ...
    def ended(self, info: CallInfo) -> None:
        self.info = info


async def test_an_offload_asked_as_the_tool_returns_leaves_no_offload_reason(
    tmp_path: Path,
) -> None:
    store = OneRow()
    coordinator = coordinator_on(store, tmp_path)
    returns = asyncio.Event()

    async def held(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        await returns.wait()
        return ToolResult(summary="exit code 0")

    observer = Ended()
    tool = Tool("held", "", {"type": "object"}, held)
    inv = Invocation("c1", "s", "t1", "default", "held", {})
    run = asyncio.ensure_future(coordinator.run(inv, tool, observer=observer))
    while not coordinator.live_count():
        await asyncio.sleep(0.001)

    offload = asyncio.ensure_future(coordinator.offload("s", "c1"))
    await asyncio.wait_for(store.offload_committed.wait(), 5)
    returns.set()  # the tool returns while the move's write is under way
    outcome = await asyncio.wait_for(run, 5)
    store.answer_offload.set()
    await asyncio.wait_for(offload, 5)

    assert not outcome.offloaded and outcome.end_state == "success"
    assert store.row["status"] == "completed"
    assert store.row["offload_reason"] is None
    assert observer.info is not None and observer.info.offload_reason is None


async def test_an_offload_while_the_end_is_recorded_is_refused(tmp_path: Path) -> None:
    """Once the tool has returned and its end is being recorded (the tree's use being
    measured), the turn takes the result: a move to the background then was answered
    202 and left ``offload_reason: "user"`` on that result."""
    launcher = Launcher()
    store = RecordingStore()
    coordinator = coordinator_on(store, tmp_path, launcher)
    tool = launching_tool(tmp_path)
    inv = Invocation("c1", "s", "t1", "default", "held", {})
    call = asyncio.ensure_future(coordinator.run(inv, tool))
    while not coordinator.live_count():
        await asyncio.sleep(0.001)
    launcher.process.done.set()  # the command exits 0
    await asyncio.wait_for(launcher.process.measuring.wait(), 5)  # its end being recorded
    refused: ToolCallConflict | None = None
    try:
        await coordinator.offload("s", "c1")
    except ToolCallConflict as exc:
        refused = exc
    launcher.process.may_measure.set()
    outcome = await asyncio.wait_for(call, 5)

    assert refused is not None, "the move to the background was accepted"
    assert not outcome.offloaded and outcome.end_state == "success"
    assert store.ended["c1"]["offload_reason"] is None
