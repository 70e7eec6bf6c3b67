"""A kill deadline extended while the call's tree is still starting reaches the launcher
(the keeper's runner enforces the deadline it was given on its own)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from coordinator_parts import no_delivery, small_config
from test_toolcalls_limits import SlowWritingStore

from tether.sandbox.limits import Resources
from tether.toolcalls.call import Invocation
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.toolcalls.launcher import EndCause, LaunchedProcess, LaunchSpec, OutputSink
from tether.tools.base import RunContext, Tool, ToolResult


class HeldProcess:
    def __init__(self) -> None:
        self.kill_deadlines: list[float | None] = []
        self.done = asyncio.Event()

    @property
    def pgid(self) -> int:
        return 0

    async def follow(self, sink: OutputSink) -> None:
        await self.done.wait()

    async def wait(self) -> int:
        await self.done.wait()
        return 0

    async def set_kill_deadline(self, kill_after: float | None) -> None:
        self.kill_deadlines.append(kill_after)

    async def resources(self) -> Resources | None:
        return None

    def end_cause(self) -> EndCause | None:
        return None


class SlowStartLauncher:
    """Starts a tree only when told to, as a loaded runner might."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.go = asyncio.Event()
        self.process = HeldProcess()
        self.spec: LaunchSpec | None = None

    async def start(self, spec: LaunchSpec) -> LaunchedProcess:
        self.spec = spec
        self.asked.set()
        await self.go.wait()
        return self.process

    async def stop(self, trees: Sequence[LaunchedProcess], grace: float, force: bool) -> None:
        self.process.done.set()


async def test_an_extend_during_the_start_is_passed_to_the_launcher(tmp_path: Path) -> None:
    launcher = SlowStartLauncher()
    config = small_config(max_total=4)
    store: Any = SlowWritingStore()
    coordinator = ToolCallCoordinator(store, config, tmp_path, (), no_delivery, launcher=launcher)

    async def run(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        process = await ctx.launch(("/bin/true",), tmp_path, {})
        await process.wait()
        return ToolResult()

    tool = Tool("held", "", {"type": "object"}, run, timeout_of=lambda _args: 5.0)
    call = asyncio.ensure_future(
        coordinator.run(Invocation("c1", "s", "t1", "default", "held", {}), tool)
    )
    await asyncio.wait_for(launcher.asked.wait(), 5)
    assert launcher.spec is not None and launcher.spec.kill_after is not None
    assert launcher.spec.kill_after <= 5.0
    await coordinator.extend("s", "c1", "kill", 600)
    launcher.go.set()
    async with asyncio.timeout(5):
        while not launcher.process.kill_deadlines:
            await asyncio.sleep(0.001)
    (sent,) = launcher.process.kill_deadlines
    assert sent is not None and sent > 600
    launcher.process.done.set()
    await asyncio.wait_for(call, 5)
