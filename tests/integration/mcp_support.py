"""Connecting a test server to the MCP fixture server (tests/integration/mcp_fixture_server.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
from core_support import Stack, free_port, wait_for
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))


def state_dir(stack: Stack) -> Iterator[Path]:
    """Body of a fixture: a fresh state directory for the fixture server, in the
    workspace (a stdio server runs in the sandbox, whose /tmp is not the test's)."""
    path = stack.workspace / f"mcp-state-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def stdio_client(state: Path, **fields: Any) -> dict[str, Any]:
    """A client spec that starts the fixture over stdio."""
    return {
        "name": fields.pop("name", "fixture"),
        "transport": "stdio",
        "command": sys.executable,
        "args": [FIXTURE, "stdio", str(state)],
        **fields,
    }


def add_client(stack: Stack, key: str, spec: dict[str, Any], ready: bool = True) -> dict[str, Any]:
    """Create the client; by default wait until it is connected with its tools listed."""
    resp = stack.api("POST", "/api/mcp", json={"client_key": key, "client": spec})
    assert resp.status_code == 201, resp.text
    if not ready:
        return dict(resp.json())
    return wait_client(stack, key, "ready")


def wait_client(stack: Stack, key: str, status: str, timeout: float = 20.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        info = stack.api("GET", f"/api/mcp/{key}").json()
        return info if info["status"] == status else None

    return wait_for(probe, timeout, f"MCP client {key} to be {status}")


def remove_client(stack: Stack, key: str) -> None:
    stack.api("DELETE", f"/api/mcp/{key}")


def mcp_call(key: str, tool: str, **arguments: Any) -> dict[str, Any]:
    """A scripted model reply calling one MCP tool."""
    return {"tool_calls": [(f"{key}__{tool}", json.dumps(arguments))]}


def release(state: Path, tag: str) -> None:
    (state / f"{tag}.release").touch()


@contextmanager
def http_fixture(state: Path) -> Iterator[str]:
    """The fixture served over streamable HTTP on loopback; yields its MCP URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, FIXTURE, "http", str(port), str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:

        def up() -> bool:
            try:
                httpx.get(url, timeout=1.0)
            except httpx.HTTPError:
                return False
            return True

        wait_for(up, 20.0, "the HTTP MCP fixture to listen")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def modern_client(server: Any) -> AsyncIterator[Client]:
    """An SDK client of ``server``'s own /mcp on the 2026-07-28 wire, which new SDK
    clients speak by default: no session, one exchange per request, and a closed
    response stream is the request's cancellation."""
    headers = {"Authorization": f"Bearer {server.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(
            streamable_http_client(f"{server.base_url}/mcp", http_client=http),
            mode="2026-07-28",
        ) as client,
    ):
        yield client
