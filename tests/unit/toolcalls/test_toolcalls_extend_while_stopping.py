"""A call whose tree is being stopped (its kill deadline fired, or it was cancelled)
cannot be extended: the extend was answered 202, the new deadline shown, and the call
killed anyway."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from coordinator_parts import coordinator_on
from test_toolcalls_extend_while_starting import HeldProcess
from test_toolcalls_limits import SlowWritingStore

from tether.toolcalls.call import Invocation
from tether.toolcalls.errors import ToolCallConflict
from tether.toolcalls.launcher import LaunchedProcess, LaunchSpec
from tether.tools.base import RunContext, Tool, ToolResult


class GracefulLauncher:
    """Starts a held tree; a stop is only noted (the tree traps SIGTERM and runs on
    through the grace period) until the test ends it."""

    def __init__(self) -> None:
        self.process = HeldProcess()
        self.stopped = asyncio.Event()

    async def start(self, spec: LaunchSpec) -> LaunchedProcess:
        return self.process

    async def stop(self, trees: Sequence[LaunchedProcess], grace: float, force: bool) -> None:
        self.stopped.set()


async def start_held(tmp_path: Path, timeout: float) -> tuple[Any, GracefulLauncher, Any]:
    launcher = GracefulLauncher()
    store: Any = SlowWritingStore()
    coordinator = coordinator_on(store, tmp_path, launcher)

    async def run(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        process = await ctx.launch(("/bin/true",), tmp_path, {})
        await process.wait()
        return ToolResult()

    tool = Tool("held", "", {"type": "object"}, run, timeout_of=lambda _args: timeout)
    call = asyncio.ensure_future(
        coordinator.run(Invocation("c1", "s", "t1", "default", "held", {}), tool)
    )
    return coordinator, launcher, call


@pytest.mark.parametrize("target", ["kill", "offload"])
async def test_an_extend_after_the_kill_deadline_fired_is_refused(
    tmp_path: Path, target: str
) -> None:
    coordinator, launcher, call = await start_held(tmp_path, timeout=0.05)
    await asyncio.wait_for(launcher.stopped.wait(), 5)  # the deadline fired
    with pytest.raises(ToolCallConflict, match="kill deadline passed"):
        await coordinator.extend("s", "c1", target, 600)
    info = await coordinator.info("s", "c1")
    assert info.kill_remaining is not None and info.kill_remaining < 1
    launcher.process.done.set()
    outcome = await asyncio.wait_for(call, 5)
    assert outcome.end_state == "timeout"


async def test_an_extend_during_a_graceful_cancel_is_refused(tmp_path: Path) -> None:
    coordinator, launcher, call = await start_held(tmp_path, timeout=60)
    while coordinator.live_count() == 0 or (await coordinator.info("s", "c1")).status != "running":
        await asyncio.sleep(0.001)
    await coordinator.cancel("s", "c1", force=False)
    await asyncio.wait_for(launcher.stopped.wait(), 5)
    with pytest.raises(ToolCallConflict, match="being stopped"):
        await coordinator.extend("s", "c1", "kill", 600)
    launcher.process.done.set()
    outcome = await asyncio.wait_for(call, 5)
    assert outcome.end_state == "cancelled"
