"""What the coordinator's unit tests share: a small configuration, a delivery that
drops background results, and a tool whose tree comes from the test's launcher."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from tether.toolcalls import deadlines
from tether.toolcalls.call import Invocation
from tether.toolcalls.config import CoordinatorConfig
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.toolcalls.live_call import LiveCall
from tether.toolcalls.output import OutputBuffer
from tether.tools.base import RunContext, Tool, ToolResult

SMALL = CoordinatorConfig(
    offload_after=None,
    cancel_grace=1.0,
    model_output_chars=1000,
    output_memory_bytes=10_000,
    max_per_session=4,
    max_total=8,
    marker_prefix="test",
    output_location="/out/{session_id}/{call_id}",
)


def small_config(**changes: Any) -> CoordinatorConfig:
    """The small configuration, with ``changes``."""
    return replace(SMALL, **changes)


async def no_delivery(session_id: str, call_id: str, text: str) -> None:
    return None


def running_call(call_id: str = "c1", session_id: str = "s1") -> LiveCall:
    """A shell call in ``session_id``, running, with nothing printed yet."""
    return LiveCall(
        invocation=Invocation(call_id, session_id, "t1", "default", "execute_shell_command", {}),
        status="running",
        deadlines=deadlines.initial(0.0, None, None, None),
        buffer=OutputBuffer(10_000, 1000),
        marker=f"test:{call_id}",
    )


def coordinator_on(
    store: Any, workdir: Path, launcher: Any = None, **changes: Any
) -> ToolCallCoordinator:
    """A coordinator on ``store`` (and ``launcher``: the default one if None) of the small
    configuration, with ``changes``."""
    return ToolCallCoordinator(
        store, small_config(**changes), workdir, (), no_delivery, launcher=launcher
    )


def launching_tool(workdir: Path) -> Tool:
    """A tool that starts a tree through the call's launcher and returns "exit code 0"
    once the tree has ended (its deadline a minute away)."""

    async def run(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        process = await ctx.launch(("/bin/true",), workdir, {})
        await process.wait()
        return ToolResult(summary="exit code 0")

    return Tool("held", "", {"type": "object"}, run, timeout_of=lambda _args: 60.0)
