"""A real MCP server, written with the SDK, that the MCP tests connect Tether to.

    python mcp_fixture_server.py stdio STATE_DIR
    python mcp_fixture_server.py http PORT STATE_DIR

Tests steer it through files in STATE_DIR: a call of `hold` runs until `<tag>.release`
appears, and leaves `<tag>.cancelled` behind if it was cancelled; every start of the
server appends a line to `starts`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("tether-fixture")
STATE = Path(sys.argv[-1])


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Answer with the text it was given."""
    return f"echo: {text}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def hold(tag: str, ctx: Context) -> str:
    """Report progress until the test releases it."""
    (STATE / f"{tag}.started").touch()
    step = 0
    try:
        while not (STATE / f"{tag}.release").exists():
            step += 1
            await ctx.report_progress(step, None, f"{tag} working, step {step}")
            await anyio.sleep(0.05)
    except BaseException:
        (STATE / f"{tag}.cancelled").touch()
        raise
    return f"{tag} released after {step} steps"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def wipe(target: str) -> str:
    """Pretend to delete something (a destructive tool, as far as its hints say)."""
    (STATE / "wiped").write_text(target)
    return f"wiped {target}"


@server.tool()
def hidden() -> str:
    """A tool the allow-list tests hide from the model."""
    return "hidden ran"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def env_value(name: str) -> str:
    """The value of one environment variable of the server process."""
    return os.environ.get(name, "<unset>")


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `grown` and tell the client that the tool list changed."""

    def grown() -> str:
        return "grown ran"

    server.add_tool(grown, name="grown", description="A tool added while the server runs.")
    await ctx.session.send_tool_list_changed()
    return "grew"


@server.tool()
async def crash(ctx: Context) -> str:
    """Exit the server process in the middle of the call."""
    await ctx.report_progress(1, 2, "about to crash")
    (STATE / "crashed").touch()
    os._exit(3)


def main() -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    with (STATE / "starts").open("a") as f:
        f.write(f"{os.getpid()}\n")
    if sys.argv[1] == "stdio":
        server.run()
    else:
        import uvicorn

        app = server.streamable_http_app()
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")


if __name__ == "__main__":
    main()
