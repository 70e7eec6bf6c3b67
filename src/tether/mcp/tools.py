"""An MCP server's tool as a Tether tool: same lifecycle as the shell's.

The call runs in-process as the coordinator's work task, so the coordinator's cancel
(cancelling that task) makes the SDK send ``notifications/cancelled``, offload leaves it
running in the background, and the kill deadline is the client's ``http_timeout`` or
the default. Progress and log notifications become output lines, so ``/stream`` shows
them live; the result's content is the last output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError

from tether.mcp.connection import McpConnection, McpConnectionLost
from tether.mcp.spec import TOOL_SEPARATOR
from tether.tools.base import RunContext, Tool, ToolResult

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def model_name(client_key: str, tool_name: str) -> str:
    """The name the model sees for a client's tool."""
    return f"{client_key}{TOOL_SEPARATOR}{tool_name}"


def as_tether_tool(conn: McpConnection, tool: types.Tool, default_timeout: float) -> Tool:
    """Wrap one listed MCP tool; ``conn`` is asked at call time, so reconnects are seen."""

    async def run(arguments: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            ctx.emit("stderr", progress_line(progress, total, message))

        def logs(line: str) -> None:
            ctx.emit("stderr", line.rstrip("\n") + "\n")

        try:
            result = await conn.call(tool.name, dict(arguments), progress, logs)
        except McpConnectionLost as exc:
            return ToolResult(is_error=True, summary=f"error: {exc}")
        except MCPError as exc:
            return ToolResult(is_error=True, summary=f"the MCP server answered an error: {exc}")
        text = content_text(result.content)
        if text:
            ctx.emit("stdout", text if text.endswith("\n") else text + "\n")
        return ToolResult(
            is_error=bool(result.is_error), summary="error" if result.is_error else ""
        )

    return Tool(
        name=model_name(conn.key, tool.name),
        description=tool.description or tool.title or f"{tool.name} (MCP server {conn.key})",
        parameters=tool.input_schema or _EMPTY_SCHEMA,
        run=run,
        timeout_of=lambda _args: conn.spec.kill_deadline(default_timeout),
    )


def progress_line(done: float, total: float | None, message: str | None) -> str:
    """One readable output line for a progress notification."""
    amount = f"{done:g}/{total:g}" if total else f"{done:g}"
    return f"[progress {amount}] {message}\n" if message else f"[progress {amount}]\n"


def content_text(blocks: list[types.ContentBlock]) -> str:
    """The text of a result's content blocks; other kinds are named, not dumped."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.EmbeddedResource) and isinstance(
            block.resource, types.TextResourceContents
        ):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{block.type} content omitted]")
    return "\n".join(parts)
