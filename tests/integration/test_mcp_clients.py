"""/api/mcp: MCP client configuration routes (QwenPaw's paths and shapes, Tether's live
status), secrets sealed at rest, failures readable, tool-list changes picked up."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from core_support import Stack, new_session, stack_for_module, wait_for
from mcp_support import (
    add_client,
    mcp_call,
    remove_client,
    state_dir,
    stdio_client,
    wait_client,
)

from database_support import stored_rows

pytestmark = pytest.mark.integration

SECRET = "sk-mcp-secret-value-0123456789"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("mcp-clients")


@pytest.fixture()
def state(stack: Stack) -> Iterator[Path]:
    yield from state_dir(stack)


def test_create_get_list_update_toggle_delete(stack: Stack, state: Path) -> None:
    spec = stdio_client(state, name="Fixture", description="the test server", env={"TOKEN": SECRET})
    created = add_client(stack, "crud", spec, ready=False)
    assert created["key"] == "crud" and created["name"] == "Fixture"
    assert created["transport"] == "stdio" and created["env"] == {"TOKEN": "********"}
    assert created["status"] in ("connecting", "ready")
    ready = wait_client(stack, "crud", "ready")
    assert ready["tool_count"] >= 5 and ready["error"] is None
    assert [c["key"] for c in stack.api("GET", "/api/mcp").json()] == ["crud"]

    updated = stack.api(
        "PUT", "/api/mcp/crud", json={"description": "changed", "env": ready["env"]}
    )
    assert updated.status_code == 200, updated.text
    assert updated.json()["description"] == "changed"
    assert updated.json()["env"] == {"TOKEN": "********"}
    wait_client(stack, "crud", "ready")
    # The masked value sent back kept the stored secret: the server still sees it.
    session = new_session()
    stack.model.script(mcp_call("crud", "env_value", name="TOKEN"), {"text": "ok"})
    task = stack.wait_task(stack.submit("read it", session))
    assert any(SECRET in str(m.get("content")) for m in task["messages"] if m["role"] == "tool")

    toggled = stack.api("PATCH", "/api/mcp/toggle/crud")
    assert toggled.status_code == 200 and toggled.json()["status"] == "disabled"
    assert stack.api("GET", "/api/mcp/tools/crud").json() == []
    assert stack.api("PATCH", "/api/mcp/toggle/crud").json()["enabled"] is True
    wait_client(stack, "crud", "ready")

    deleted = stack.api("DELETE", "/api/mcp/crud")
    assert deleted.status_code == 200
    assert deleted.json() == {"message": "MCP client 'crud' deleted successfully"}
    assert stack.api("GET", "/api/mcp").json() == []


def test_secrets_never_leave_sealed(stack: Stack, state: Path) -> None:
    # Not SECRET: another test has the server print that one into a chat on purpose.
    secret = "sk-sealed-only-9876543210"
    spec = stdio_client(state, headers={"X-Key": secret}, env={"API_KEY": secret})
    add_client(stack, "sealed", spec, ready=False)
    try:
        assert secret not in stack.api("GET", "/api/mcp/sealed").text
        assert secret not in stack.api("GET", "/api/mcp").text
        wait_client(stack, "sealed", "ready")
        for path in stack.server.home.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
        assert secret not in stored_rows(stack.server.home, "mcp_clients")
    finally:
        remove_client(stack, "sealed")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"client_key": "bad key", "client": {"name": "x", "command": "x"}}, "client_key"),
        ({"client_key": "a__b", "client": {"name": "x", "command": "x"}}, "client_key"),
        ({"client_key": "tools", "client": {"name": "x", "command": "x"}}, "client_key"),
        ({"client_key": "ok", "client": {"name": "x"}}, "command"),
        ({"client_key": "ok", "client": {"name": "x", "transport": "sse"}}, "url"),
        (
            {"client_key": "ok", "client": {"name": "x", "transport": "sse", "url": "file:///x"}},
            "url",
        ),
        ({"client_key": "ok", "client": {"name": "x", "command": "x", "bogus": 1}}, "bogus"),
        ({"client_key": "ok", "client": {"name": "x", "command": "x", "http_timeout": 0}}, "http"),
        ({"client_key": "ok"}, "client"),
    ],
)
def test_bad_input_is_422_naming_the_field_and_changes_nothing(
    stack: Stack, body: dict[str, object], field: str
) -> None:
    resp = stack.api("POST", "/api/mcp", json=body)
    assert resp.status_code == 422, resp.text
    assert field in resp.text
    assert stack.api("GET", "/api/mcp").json() == []


def test_duplicate_key_is_409_and_unknown_key_404(stack: Stack, state: Path) -> None:
    add_client(stack, "dup", stdio_client(state), ready=False)
    try:
        again = stack.api(
            "POST", "/api/mcp", json={"client_key": "dup", "client": stdio_client(state)}
        )
        assert again.status_code == 409
        assert again.json()["detail"] == "MCP client 'dup' already exists. Use PUT to update."
    finally:
        remove_client(stack, "dup")
    for method, path in [
        ("GET", "/api/mcp/nope"),
        ("PUT", "/api/mcp/nope"),
        ("DELETE", "/api/mcp/nope"),
        ("PATCH", "/api/mcp/toggle/nope"),
        ("GET", "/api/mcp/tools/nope"),
        ("PUT", "/api/mcp/tools/nope"),
    ]:
        resp = stack.api(method, path, json={} if method == "PUT" else None)
        assert resp.status_code == 404, (method, path, resp.text)
        assert resp.json()["detail"] == "MCP client 'nope' not found"


def test_a_server_that_fails_to_start_shows_failed_with_its_stderr(stack: Stack) -> None:
    spec = {
        "name": "broken",
        "command": sys.executable,
        "args": ["-c", "import sys; sys.stderr.write('boom: missing config\\n'); sys.exit(2)"],
    }
    add_client(stack, "broken", spec, ready=False)
    try:
        failed = wait_client(stack, "broken", "failed")
        assert "boom: missing config" in failed["error"]
        tools = stack.api("GET", "/api/mcp/tools/broken")
        assert tools.status_code == 502 and "boom" in tools.json()["detail"]
        # The rest of Tether is unaffected.
        assert stack.api("GET", "/api/healthz").status_code == 200
    finally:
        remove_client(stack, "broken")


def test_a_tool_list_change_is_picked_up(stack: Stack, state: Path) -> None:
    add_client(stack, "growing", stdio_client(state))
    try:
        names = [t["name"] for t in stack.api("GET", "/api/mcp/tools/growing").json()]
        assert "grown" not in names
        stack.model.script(mcp_call("growing", "grow"), {"text": "grew"})
        stack.wait_task(stack.submit("grow", new_session()))
        wait_for(
            lambda: (
                "grown" in [t["name"] for t in stack.api("GET", "/api/mcp/tools/growing").json()]
            ),
            what="the new tool to be listed",
        )
        stack.model.script({"text": "look"})
        stack.wait_task(stack.submit("what now", new_session()))
        offered = {t["function"]["name"] for t in stack.model.requests[-1]["tools"]}
        assert "growing__grown" in offered
    finally:
        remove_client(stack, "growing")
