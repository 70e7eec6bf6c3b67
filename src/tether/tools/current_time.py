"""The `get_current_time` tool."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tether.tools.base import RunContext, Tool, ToolResult


async def _current_time(_args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
    now = datetime.now(UTC).astimezone()
    ctx.emit("stdout", f"{now.isoformat(timespec='seconds')} ({now.strftime('%A')})")
    return ToolResult()


TIME_TOOL = Tool(
    name="get_current_time",
    description="Return the current date and time with the server's UTC offset.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    run=_current_time,
)
