"""``/mcp`` is built by its first request: no SDK at start, one build for a burst of
first requests, and the endpoint's session manager stopped with the application."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
from starlette.applications import Starlette

from tether.config import Settings
from tether.mcp.mount import PATH, LazyEndpoint

_VERSION = "2025-06-18"
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": _VERSION,
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
    endpoint = LazyEndpoint(_no_services, Settings())
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
        sessions = {a.headers["mcp-session-id"] for a in answers}
        assert len(sessions) == 8
        # One endpoint knows every session: a second one built by the burst would not.
        for session in sessions:
            headers = {**_HEADERS, "mcp-session-id": session, "mcp-protocol-version": _VERSION}
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            answer = await client.post(PATH, json=ping, headers=headers)
            assert answer.status_code == 200, answer.text
    # The session manager and its sessions ended with the application.
    assert _tasks_left() == []


async def test_an_endpoint_never_asked_stops_at_once() -> None:
    endpoint = LazyEndpoint(_no_services, Settings())
    async with endpoint.serving():
        pass
    assert _tasks_left() == []


# Runs a whole application lifespan (the store, every service, the recovery, the
# schema check) in a fresh interpreter, then names the late-loaded packages it imported.
_START = """
import asyncio, sys
from pathlib import Path
from tether.app import create_app
from tether.config import Settings

async def serve_once(home):
    app = create_app(Settings(home=Path(home), keeper=False, sandbox="off")).app
    async with app.router.lifespan_context(app):
        pass

asyncio.run(serve_once(sys.argv[1]))
print(sorted({m.split(".")[0] for m in sys.modules} & {"mcp", "openai", "alembic"}))
"""


def _start_once(home: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _START, str(home)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def test_starting_imports_no_sdk_that_waits_for_use(tmp_path: Path) -> None:
    # The MCP SDK (client and server), the model SDK and Alembic are loaded when an MCP
    # client is configured, /mcp is asked, a model is asked, or the schema must change.
    assert _start_once(tmp_path) == "['alembic']"  # an empty store gets its schema
    assert _start_once(tmp_path) == "[]"
