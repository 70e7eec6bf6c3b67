"""A client connection against a real stdio MCP server (the integration tests' fixture),
with the supervisor's pacing shortened through the Timing seam."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tether.mcp.connection import McpConnection, McpConnectionLost
from tether.mcp.seams import Timing
from tether.mcp.spec import McpClientSpec

FIXTURE = Path(__file__).parents[2] / "integration" / "mcp_fixture_server.py"
_TIMING = Timing(connect_timeout=20.0, ping_interval=5.0, backoff_first=0.1, backoff_max=30.0)


async def _until(probe: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Wait until ``probe`` holds (it reads the connection's status or the fixture's files)."""
    async with asyncio.timeout(seconds):
        while not probe():
            await asyncio.sleep(0.01)
    assert probe(), what


@asynccontextmanager
async def _connected(
    tmp_path: Path, state: Path, on_change: Callable[[], None] = lambda: None
) -> AsyncIterator[McpConnection]:
    spec = McpClientSpec(
        name="fixture", command=sys.executable, args=[str(FIXTURE), "stdio", str(state)]
    )
    conn = McpConnection(
        "fx",
        spec,
        workspace=tmp_path,
        stderr_path=tmp_path / "fx.stderr.log",
        timing=_TIMING,
        on_tools_changed=on_change,
    )
    conn.start()
    try:
        yield conn
    finally:
        await conn.close()  # the SDK's transport ends the server process with it


def _starts(state: Path) -> int:
    path = state / "starts"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _crash(conn: McpConnection) -> None:
    async def progress(_done: float, _total: float | None, _message: str | None) -> None:
        pass

    with pytest.raises(McpConnectionLost):
        await conn.call("crash", {}, progress, lambda _line: None)


async def test_the_back_off_starts_over_once_a_connection_was_ready(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Four failed starts grow the back-off (0.1, 0.2, 0.4, 0.8 s); the fifth start is
    healthy, so losing it waits the first back-off again (0.1 s), not 1.6 s."""
    caplog.set_level(logging.WARNING, logger="tether.mcp.connection")
    state = tmp_path / "state"
    state.mkdir()
    (state / "fail_starts").write_text("4")
    loop = asyncio.get_running_loop()
    failed_at: list[float] = []

    def on_change() -> None:  # the supervisor calls it as an attempt fails, before its wait
        if conn.status == "failed":
            failed_at.append(loop.time())

    async with _connected(tmp_path, state, on_change) as conn:
        await _until(lambda: conn.status == "ready", "the fifth start to be ready")
        await _crash(conn)
        await _until(lambda: len(failed_at) == 5, "the loss to be seen")
        await _until(lambda: conn.status == "connecting", "the next attempt")
        waited = loop.time() - failed_at[-1]
        await _until(lambda: conn.status == "ready", "the sixth start to be ready")
    assert (_starts(state), len(failed_at)) == (6, 5)
    # The wait really was taken (the upper side is the logged plan below: a wall-clock
    # bound would hang on the machine's load).
    assert waited >= 0.1, waited
    logged = [
        float(m.group(1))
        for r in caplog.records
        if (m := re.search(r"next attempt in ([0-9.e-]+) s", r.getMessage()))
    ]
    assert logged == [0.1, 0.2, 0.4, 0.8, 0.1]
