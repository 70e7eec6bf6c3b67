"""``/mcp`` is built by its first request: no SDK at start, one build for a burst of
first requests, and the endpoint's session manager stopped with the application."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
from starlette.applications import Starlette

from tether.mcp.mount import PATH, LazyEndpoint

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "burst", "version": "1"},
    },
}
_HEADERS = {"Accept": "application/json, text/event-stream"}


def _tasks_left() -> list[asyncio.Task[object]]:
    # sse_starlette keeps one watcher task per process for server shutdowns.
    return [
        t
        for t in asyncio.all_tasks()
        if t is not asyncio.current_task()
        and getattr(t.get_coro(), "__qualname__", "") != "_shutdown_watcher"
    ]


def _no_services() -> object:
    raise AssertionError("initialize needs no services")


async def test_a_burst_of_first_requests_is_answered_by_one_endpoint() -> None:
    endpoint = LazyEndpoint(_no_services)
    app = Starlette(routes=[endpoint.route()])
    transport = httpx.ASGITransport(app=app)
    async with (
        endpoint.serving(),
        httpx.AsyncClient(transport=transport, base_url="http://localhost") as client,
    ):
        answers = await asyncio.gather(
            *(client.post(PATH, json=_INITIALIZE, headers=_HEADERS) for _ in range(8))
        )
        assert [a.status_code for a in answers] == [200] * 8
        assert all('"serverInfo"' in a.text and '"tether"' in a.text for a in answers)
        session_ids = {a.headers["mcp-session-id"] for a in answers}
        assert len(session_ids) == 8  # one session manager, eight sessions
    # The session manager and its sessions ended with the application.
    assert _tasks_left() == []


async def test_an_endpoint_never_asked_stops_at_once() -> None:
    endpoint = LazyEndpoint(_no_services)
    async with endpoint.serving():
        pass
    assert _tasks_left() == []


def test_starting_imports_no_sdk_that_waits_for_use() -> None:
    # The MCP SDK (client and server), the model SDK and Alembic are loaded when an MCP
    # client is configured, /mcp is asked, a turn runs, or the schema must change.
    probe = (
        "import sys, tether.cli, tether.app\n"
        "late = ('mcp', 'openai', 'alembic')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(late)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
