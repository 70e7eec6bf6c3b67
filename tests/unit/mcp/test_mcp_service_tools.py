"""A client whose stdio server never answers its initialize: asking for its tools says it
is still connecting, and closing it returns (the server is ended)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import psutil
import pytest

from tether.mcp.seams import Timing
from tether.mcp.service import McpService, McpUnavailable
from tether.mcp.spec import McpClientSpec
from tether.security.keybox import KeyBox
from tether.store.database import Database
from tether.store.mcp import McpClientRepository


def _silent_servers(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


async def test_a_server_that_never_answers_is_said_to_be_connecting_and_closes(
    db: Database, tmp_path: Path
) -> None:
    """The 502 said 'Failed to query tools from MCP server: None'. And a close that came
    while the transport was ending a failed attempt was swallowed: the supervisor went on
    retrying for ever, and the close (a DELETE, the server's shutdown) never returned."""
    service = McpService(
        McpClientRepository(db),
        KeyBox(tmp_path / "a.key"),
        workspace=tmp_path,
        state_dir=tmp_path / "mcp",
        default_timeout=60.0,
        timing=Timing(connect_timeout=0.5),
    )
    await service.start()
    marker = f"silent-{tmp_path.name}"
    # A stdio "server" that never reads its stdin, so never answers, and outlives its
    # stdin's end (the SDK ends it after a grace).
    code = "import sys, time; time.sleep(600)"
    silent = McpClientSpec(name="silent", command=sys.executable, args=["-c", code, marker])
    try:
        await service.create("silent", silent)
        with pytest.raises(McpUnavailable) as refused:
            await service.list_tools("silent")
    finally:
        async with asyncio.timeout(30):  # it hung for ever
            await service.close()

    assert "still connecting after 0.5 s" in str(refused.value)
    assert _silent_servers(marker) == []
