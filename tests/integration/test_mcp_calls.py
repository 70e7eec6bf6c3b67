"""MCP tool calls are tool calls like the shell's: live progress, cancel that the MCP
server sees, offload, deadlines, a crashing server, governance from tool hints, and the
tool allow-list; over stdio and streamable HTTP."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from core_support import Stack, new_session, sse_events, stack_for_module, wait_for
from mcp_support import (
    add_client,
    http_fixture,
    mcp_call,
    release,
    remove_client,
    state_dir,
    stdio_client,
    wait_client,
)

pytestmark = pytest.mark.integration

KEY = "fx"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("mcp-calls", TETHER_CANCEL_GRACE_SECONDS="0.5")


@pytest.fixture(scope="module")
def state(stack: Stack) -> Iterator[Path]:
    yield from state_dir(stack)


@pytest.fixture(scope="module")
def client(stack: Stack, state: Path) -> Iterator[str]:
    add_client(stack, KEY, stdio_client(state))
    yield KEY
    remove_client(stack, KEY)


@pytest.fixture(autouse=True)
def _every_request_valid(stack: Stack) -> Iterator[None]:
    yield
    stack.model.assert_valid()


def _tag() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def _path(session: str, call_id: str, action: str = "") -> str:
    return f"/api/tool-calls/{session}/{call_id}" + (f"/{action}" if action else "")


def _start(stack: Stack, *replies: dict[str, object]) -> tuple[str, str, dict[str, object]]:
    session = new_session()
    stack.model.script(*replies)
    task_id = stack.submit("use the tool", session)
    return session, task_id, stack.wait_call(session)


def _run_to_end(stack: Stack, *replies: dict[str, object]) -> tuple[str, dict[str, object]]:
    """Run a whole turn; (session, the task) once it finished."""
    session = new_session()
    stack.model.script(*replies)
    return session, stack.wait_task(stack.submit("use the tool", session))


def _first_call_id(task: dict[str, object]) -> str:
    messages = task["messages"]
    assert isinstance(messages, list)
    return str(next(m["x_tether_call_id"] for m in messages if m["role"] == "tool"))


def _output_text(stack: Stack, session: str, call_id: str) -> str:
    parts = stack.api("GET", _path(session, call_id, "output")).json()["content"]
    return "".join(str(p.get("text", "")) for p in parts)


def _tool_results(stack: Stack) -> list[str]:
    return [
        str(m.get("content"))
        for body in stack.model.requests
        for m in body["messages"]
        if m["role"] == "tool"
    ]


def test_progress_is_live_on_the_stream_and_the_result_reaches_the_model(
    stack: Stack, client: str, state: Path
) -> None:
    tag = _tag()
    session, task_id, call = _start(stack, mcp_call(client, "hold", tag=tag), {"text": "done"})
    call_id = str(call["tool_call_id"])
    assert call["tool_name"] == f"{client}__hold"
    headers = {"Authorization": f"Bearer {stack.server.token}"}
    with stack.server._client.stream(
        "GET", _path(session, call_id, "stream"), headers=headers
    ) as resp:
        events = sse_events(resp.iter_lines())
        first = next(e for e in events if e.data["type"] == "chunk")
        assert f"{tag} working, step" in first.data["text"]
        assert stack.call(session, call_id)["status"] == "running"
        release(state, tag)
        rest = list(events)
    assert rest[-1].data["type"] == "done"
    ended = stack.wait_completed(session, call_id)
    assert ended["end_state"] == "success"
    assert stack.wait_task(task_id)["result"]["status"] == "completed"
    assert any(f"{tag} released after" in text for text in _tool_results(stack))
    output = _output_text(stack, session, call_id)
    assert "[progress 1]" in output and f"{tag} released after" in output


def test_cancel_ends_the_call_at_once_and_the_server_sees_it(
    stack: Stack, client: str, state: Path
) -> None:
    tag = _tag()
    session, task_id, call = _start(stack, mcp_call(client, "hold", tag=tag), {"text": "ok"})
    call_id = str(call["tool_call_id"])
    wait_for(lambda: (state / f"{tag}.started").exists(), what="the MCP tool to start")
    resp = stack.api("POST", _path(session, call_id, "cancel"), json={})
    assert resp.status_code == 202, resp.text
    ended = stack.wait_completed(session, call_id)
    assert ended["end_state"] == "cancelled"
    wait_for(lambda: (state / f"{tag}.cancelled").exists(), what="the server to see the cancel")
    stack.wait_task(task_id)


def test_offload_lets_the_turn_finish_and_delivers_the_late_result(
    stack: Stack, client: str, state: Path
) -> None:
    tag = _tag()
    session, task_id, call = _start(stack, mcp_call(client, "hold", tag=tag), {"text": "carry on"})
    call_id = str(call["tool_call_id"])
    assert stack.api("POST", _path(session, call_id, "offload")).status_code == 202
    assert stack.wait_task(task_id)["result"]["status"] == "completed"
    assert stack.call(session, call_id)["status"] == "offloaded"
    stack.model.script({"text": "noted the result"})
    release(state, tag)
    assert stack.wait_completed(session, call_id)["end_state"] == "success"
    wait_for(
        lambda: any(f"{tag} released after" in str(m) for m in stack.messages(session)),
        what="the background result in the session",
    )
    wait_for(
        lambda: any("noted the result" in json.dumps(m) for m in stack.messages(session)),
        what="the wake-up turn to answer",
    )


def test_a_call_dies_at_its_deadline_unless_extended(stack: Stack, state: Path) -> None:
    key = "fxshort"
    add_client(stack, key, stdio_client(state, name="short", http_timeout=3))
    try:
        kept, doomed = _tag(), _tag()
        s1, t1, c1 = _start(stack, mcp_call(key, "hold", tag=kept), {"text": "a"})
        extended = stack.api(
            "POST", _path(s1, str(c1["tool_call_id"]), "extend-deadline"), json={"seconds": 120}
        )
        assert extended.status_code == 202, extended.text
        s2, t2, c2 = _start(stack, mcp_call(key, "hold", tag=doomed), {"text": "b"})
        timed_out = stack.wait_completed(s2, str(c2["tool_call_id"]), timeout=30)
        assert timed_out["end_state"] == "timeout"
        wait_for(lambda: (state / f"{doomed}.cancelled").exists(), what="the cancel on timeout")
        # The first call started earlier with the same 3 s deadline, and still runs.
        assert stack.call(s1, str(c1["tool_call_id"]))["status"] == "running"
        release(state, kept)
        assert stack.wait_completed(s1, str(c1["tool_call_id"]))["end_state"] == "success"
        stack.wait_task(t1)
        stack.wait_task(t2)
    finally:
        remove_client(stack, key)


def test_a_change_that_is_not_the_connection_leaves_calls_in_flight_running(
    stack: Stack, client: str, state: Path
) -> None:
    """A new description (or name, or allow-list) replaced the connection: the call in
    flight ended 'MCP server closed the connection' and the server saw a cancel."""
    starts = len((state / "starts").read_text().split())
    tag = _tag()
    session, task_id, call = _start(stack, mcp_call(client, "hold", tag=tag), {"text": "ok"})
    call_id = str(call["tool_call_id"])
    wait_for(lambda: (state / f"{tag}.started").exists(), what="the MCP tool to start")
    for change in ({"description": "changed"}, {"name": "renamed"}):
        resp = stack.api("PUT", f"/api/mcp/{client}", json=change)
        assert resp.status_code == 200, resp.text
    allowed = stack.api("PUT", f"/api/mcp/tools/{client}", json={"tools": None})
    assert allowed.status_code == 200, allowed.text
    assert stack.api("GET", f"/api/mcp/{client}").json()["status"] == "ready"
    release(state, tag)
    assert stack.wait_completed(session, call_id)["end_state"] == "success"
    assert not (state / f"{tag}.cancelled").exists()
    assert len((state / "starts").read_text().split()) == starts  # the same server
    stack.wait_task(task_id)


def test_a_server_crash_ends_the_call_with_an_error_and_the_server_comes_back(
    stack: Stack, client: str, state: Path
) -> None:
    starts = len((state / "starts").read_text().split())
    session, task = _run_to_end(stack, mcp_call(client, "crash"), {"text": "it broke"})
    assert stack.call(session, _first_call_id(task))["end_state"] == "error"
    assert task["result"]["status"] == "completed"  # type: ignore[index]
    assert any("closed the connection" in text for text in _tool_results(stack))
    wait_for(
        lambda: len((state / "starts").read_text().split()) > starts, what="the server restart"
    )
    wait_client(stack, client, "ready")
    session, task = _run_to_end(stack, mcp_call(client, "echo", text="again"), {"text": "ok"})
    assert stack.call(session, _first_call_id(task))["end_state"] == "success"


def test_a_destructive_tool_asks_at_auto_and_a_read_only_one_does_not(
    stack: Stack, client: str, state: Path
) -> None:
    session = new_session()
    stack.model.script(mcp_call(client, "wipe", target="everything"), {"text": "asked"})
    body = {
        "session_id": session,
        "input": [{"role": "user", "type": "message", "content": [{"type": "text", "text": "x"}]}],
        "request_context": {"approval_level": "auto"},
    }
    task = stack.api("POST", "/api/console/chat/task", json=body).json()["task_id"]
    pending = wait_for(
        lambda: stack.api("GET", f"/api/approval/list?session_id={session}").json()[
            "pending_approvals"
        ],
        what="an approval request",
    )
    assert f"{client}__wipe" in json.dumps(pending)
    assert not (state / "wiped").exists()
    request_id = pending[0]["request_id"]
    denied = stack.api(
        "POST", "/api/approval/deny", json={"request_id": request_id, "session_id": session}
    )
    assert denied.status_code == 200, denied.text
    stack.wait_task(task)
    assert not (state / "wiped").exists()

    stack.model.script(mcp_call(client, "echo", text="hi"), {"text": "read"})
    body["session_id"] = session = new_session()
    task = stack.api("POST", "/api/console/chat/task", json=body).json()["task_id"]
    assert stack.wait_task(task)["result"]["status"] == "completed"
    assert stack.api("GET", f"/api/approval/list?session_id={session}").json()["count"] == 0
    assert any("echo: hi" in text for text in _tool_results(stack))


def test_the_allow_list_hides_a_tool_from_the_model(stack: Stack, client: str) -> None:
    resp = stack.api("PUT", f"/api/mcp/tools/{client}", json={"tools": ["echo", "hold", "crash"]})
    assert resp.status_code == 200, resp.text
    listed = {t["name"]: t["enabled"] for t in resp.json()}
    assert listed["hidden"] is False and listed["echo"] is True
    try:
        session = new_session()
        stack.model.script({"text": "looked"})
        stack.wait_task(stack.submit("what can you do", session))
        offered = {t["function"]["name"] for t in stack.model.requests[-1]["tools"]}
        assert f"{client}__echo" in offered and f"{client}__hidden" not in offered
    finally:
        stack.api("PUT", f"/api/mcp/tools/{client}", json={"tools": None})
        wait_client(stack, client, "ready")


def test_streamable_http_server_calls_stream_progress_and_cancel(stack: Stack) -> None:
    state = Path(tempfile.mkdtemp(prefix="tether-mcp-http-"))
    try:
        with http_fixture(state) as url:
            key = "fxhttp"
            add_client(
                stack, key, {"name": "over http", "transport": "streamable_http", "url": url}
            )
            try:
                tag = _tag()
                session, task_id, call = _start(
                    stack, mcp_call(key, "hold", tag=tag), {"text": "ok"}
                )
                call_id = str(call["tool_call_id"])
                wait_for(
                    lambda: "working" in _output_text(stack, session, call_id),
                    what="progress over HTTP",
                )
                assert (
                    stack.api("POST", _path(session, call_id, "cancel"), json={}).status_code == 202
                )
                assert stack.wait_completed(session, call_id)["end_state"] == "cancelled"
                wait_for(lambda: (state / f"{tag}.cancelled").exists(), what="the cancel over HTTP")
                stack.wait_task(task_id)
            finally:
                remove_client(stack, key)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_the_default_kill_deadline_is_ten_minutes_not_thirty_seconds(
    stack: Stack, client: str, state: Path
) -> None:
    tag = _tag()
    session, task_id, call = _start(stack, mcp_call(client, "hold", tag=tag), {"text": "ok"})
    detail = stack.call(session, str(call["tool_call_id"]))
    assert 590 < detail["kill_remaining"] <= 600
    release(state, tag)
    stack.wait_task(task_id)
