"""A real MCP server, written with the SDK, that the MCP tests connect Tether to.

    python mcp_fixture_server.py stdio STATE_DIR
    python mcp_fixture_server.py http PORT STATE_DIR

Tests steer it through files in STATE_DIR: a call of `hold` runs until `<tag>.release`
appears, and leaves `<tag>.cancelled` behind if it was cancelled; every start of the
server appends a line to `starts`; `extra_tools` (a JSON list of names) adds a tool of
each name; `fail_starts` (a number N) makes the first N starts exit at once. A stdio
server runs in Tether's sandbox, whose /tmp is its own, so tests that read STATE_DIR put
it in the workspace.
"""

from __future__ import annotations

import json
import os
import socket
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


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def probe_boundary(write_to: str, read_from: str, connect_port: int, connect_unix: str = "") -> str:
    """Try to write a file, read a file, open a TCP connection to loopback and (if
    given) one to a unix socket; say, as JSON, what each attempt did ("ok" or the
    error)."""
    said: dict[str, str] = {}
    try:
        Path(write_to).write_text("written by the MCP server\n")
        said["write"] = "ok"
    except OSError as exc:
        said["write"] = f"{type(exc).__name__}: {exc.strerror}"
    try:
        said["read"] = "ok: " + Path(read_from).read_text()
    except OSError as exc:
        said["read"] = f"{type(exc).__name__}: {exc.strerror}"
    try:
        with socket.create_connection(("127.0.0.1", connect_port), timeout=5):
            said["connect"] = "ok"
    except OSError as exc:
        said["connect"] = f"{type(exc).__name__}: {exc.strerror or exc}"
    if connect_unix:
        try:
            with socket.socket(socket.AF_UNIX) as unix:
                unix.connect(connect_unix)
                said["unix"] = "ok"
        except OSError as exc:
            said["unix"] = f"{type(exc).__name__}: {exc.strerror or exc}"
    said["pid"] = str(os.getpid())
    return json.dumps(said)


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
    starts = len((STATE / "starts").read_text().splitlines())
    fail_starts = STATE / "fail_starts"
    if fail_starts.exists() and starts <= int(fail_starts.read_text()):
        sys.exit(f"failing start {starts} on purpose")
    extra = STATE / "extra_tools"
    for name in json.loads(extra.read_text()) if extra.exists() else []:
        server.add_tool(echo, name=name, description="An extra tool, named by the test.")
    if sys.argv[1] == "stdio":
        server.run()
    else:
        import uvicorn

        app = server.streamable_http_app()
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")


if __name__ == "__main__":
    main()
