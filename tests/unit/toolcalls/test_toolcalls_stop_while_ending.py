"""A stop that comes once the call's tool has returned (its end being recorded, its
tree's use being measured) changes nothing: the call was recorded ``success`` yet
``force_cancelled`` with ``killed_by: cancel``, a record that contradicts itself."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coordinator_parts import coordinator_on, launching_tool
from test_toolcalls_extend_while_starting import HeldProcess
from test_toolcalls_limits import SlowWritingStore

from tether.sandbox.limits import Resources
from tether.toolcalls.call import Invocation
from tether.toolcalls.launcher import LaunchedProcess, LaunchSpec


class MeasuredProcess(HeldProcess):
    """A tree whose use is measured after its end, as a sandbox's limits group is."""

    def __init__(self) -> None:
        super().__init__()
        self.measuring = asyncio.Event()
        self.may_measure = asyncio.Event()

    async def resources(self) -> Resources | None:
        self.measuring.set()
        await self.may_measure.wait()
        return Resources(1, 0.1, 1, None)


class RecordingStore(SlowWritingStore):
    def __init__(self) -> None:
        self.ended: dict[str, dict[str, Any]] = {}

    async def record_end(self, call_id: str, **values: Any) -> bool:
        self.ended[call_id] = values
        return await super().record_end(call_id, **values)


class Launcher:
    def __init__(self) -> None:
        self.process = MeasuredProcess()
        self.stops: list[bool] = []

    async def start(self, spec: LaunchSpec) -> LaunchedProcess:
        return self.process

    async def stop(self, trees: Sequence[LaunchedProcess], grace: float, force: bool) -> None:
        self.stops.append(force)


async def test_a_cancel_while_a_finished_call_is_recorded_changes_nothing(
    tmp_path: Path,
) -> None:
    launcher = Launcher()
    store = RecordingStore()
    coordinator = coordinator_on(store, tmp_path, launcher)
    tool = launching_tool(tmp_path)
    call = asyncio.ensure_future(
        coordinator.run(Invocation("c1", "s", "t1", "default", "held", {}), tool)
    )
    while not coordinator.live_count():
        await asyncio.sleep(0.001)
    launcher.process.done.set()  # the command exits 0
    await asyncio.wait_for(launcher.process.measuring.wait(), 5)  # its end being recorded
    await coordinator.cancel("s", "c1", force=True)
    await coordinator.stop_task("t1", "the task was stopped")
    launcher.process.may_measure.set()
    outcome = await asyncio.wait_for(call, 5)
    assert outcome.end_state == "success"
    recorded = store.ended["c1"]
    assert recorded["end_state"] == "success"
    assert recorded["force_cancelled"] is False
    assert recorded["resources"]["killed_by"] is None
    assert launcher.stops == []
