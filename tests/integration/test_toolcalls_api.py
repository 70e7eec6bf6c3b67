"""/api/tool-calls: the seven routes' contracts, including their 404, 409 and 422 paths."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from core_support import (
    SHELL,
    Stack,
    gated,
    new_session,
    open_gate,
    stack_for_module,
    wait_for,
)

pytestmark = pytest.mark.integration

MAX_TIMEOUT = 20


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module(
        "tc-api", TETHER_SHELL_MAX_TIMEOUT=str(MAX_TIMEOUT), TETHER_CANCEL_GRACE_SECONDS="0.3"
    )


@pytest.fixture(autouse=True)
def _every_request_valid(stack: Stack) -> Iterator[None]:
    yield
    stack.model.assert_valid()


@pytest.fixture
def running(stack: Stack) -> Iterator[tuple[str, str]]:
    """A shell call held open until the test ends: (session id, call id)."""
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    session, task_id, call = stack.start_shell(gated(gate, "echo started"), timeout=10)
    yield session, call["tool_call_id"]
    open_gate(stack, gate)
    stack.wait_task(task_id)


@pytest.fixture(scope="module")
def completed(stack: Stack) -> tuple[str, str]:
    """A call that has finished: (session id, call id)."""
    session, task_id, call = stack.start_shell(gated("done-gate", "echo hi"))
    open_gate(stack, "done-gate")
    stack.wait_task(task_id)
    return session, call["tool_call_id"]


def _path(session: str, call_id: str, action: str = "") -> str:
    return f"/api/tool-calls/{session}/{call_id}" + (f"/{action}" if action else "")


# ------------------------------------------------------------------ reading


def test_list_of_an_unknown_session_is_empty(stack: Stack) -> None:
    resp = stack.api("GET", "/api/tool-calls/console:nobody-here")
    assert resp.status_code == 200
    assert resp.json() == {"items": [], "total": 0}


def test_detail_of_a_running_call(stack: Stack, running: tuple[str, str]) -> None:
    session, call_id = running
    info = stack.call(session, call_id)
    assert info["status"] == "running" and info["end_state"] is None
    assert info["tool_name"] == SHELL and info["session_id"] == session
    assert info["extra"]["arguments"]["timeout"] == 10 and info["extra"]["offloadable"] is True
    assert info["max_internal_timeout_secs"] == MAX_TIMEOUT
    assert 0 < info["kill_remaining"] <= 10
    listed = stack.api("GET", f"/api/tool-calls/{session}").json()
    assert listed["total"] == 1 and listed["items"][0]["tool_call_id"] == call_id


@pytest.mark.parametrize(
    ("method", "action"),
    [
        ("GET", ""),
        ("GET", "output"),
        ("GET", "stream"),
        ("POST", "cancel"),
        ("POST", "offload"),
        ("POST", "extend-deadline"),
    ],
)
def test_unknown_call_is_404_on_every_route(stack: Stack, method: str, action: str) -> None:
    body = {"seconds": 5} if action == "extend-deadline" else None
    resp = stack.api(method, _path(new_session(), "call_nope", action), json=body)
    assert resp.status_code == 404, resp.text
    assert resp.json()["detail"] == "Tool call not found"


@pytest.mark.parametrize(
    ("method", "action"),
    [("GET", ""), ("GET", "output"), ("GET", "stream"), ("POST", "cancel"), ("POST", "offload")],
)
def test_another_sessions_call_is_404(
    stack: Stack, completed: tuple[str, str], method: str, action: str
) -> None:
    _, call_id = completed
    resp = stack.api(method, _path("console:someone-else", call_id, action))
    assert resp.status_code == 404


def test_output_and_detail_of_a_completed_call(stack: Stack, completed: tuple[str, str]) -> None:
    session, call_id = completed
    info = stack.call(session, call_id)
    assert info["status"] == "completed" and info["end_state"] == "success"
    assert info["kill_remaining"] is None
    out = stack.api("GET", _path(session, call_id, "output")).json()
    assert out == {
        "tool_call_id": call_id,
        "is_closed": True,
        "final_state": "success",
        "content": [{"type": "text", "text": "hi\n"}],
    }
    assert stack.live_calls(session) == []


def test_output_with_a_tail_sends_only_the_end_and_counts_the_rest(
    stack: Stack, completed: tuple[str, str]
) -> None:
    session, call_id = completed
    path = _path(session, call_id, "output")
    out = stack.api("GET", f"{path}?tail=2").json()
    assert out["content"] == [{"type": "text", "text": "i\n"}]
    assert out["omitted_chars"] == 1 and out["is_closed"] is True
    whole = stack.api("GET", f"{path}?tail=1000").json()
    assert whole["content"][0]["text"] == "hi\n" and whole["omitted_chars"] == 0


@pytest.mark.parametrize("tail", ["0", "-1", "two", "1.5", str((1 << 30) + 1), "9" * 5000])
def test_a_bad_tail_is_422(stack: Stack, completed: tuple[str, str], tail: str) -> None:
    session, call_id = completed
    resp = stack.api("GET", f"{_path(session, call_id, 'output')}?tail={tail}")
    assert resp.status_code == 422


# ------------------------------------------------------------------ 409: completed calls


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("cancel", None),
        ("cancel", {"force": True}),
        ("offload", None),
        ("extend-deadline", {"seconds": 5}),
    ],
)
def test_acting_on_a_completed_call_is_409(
    stack: Stack, completed: tuple[str, str], action: str, body: dict[str, object] | None
) -> None:
    session, call_id = completed
    resp = stack.api("POST", _path(session, call_id, action), json=body)
    assert resp.status_code == 409, resp.text
    assert "completed" in resp.json()["detail"]
    assert stack.call(session, call_id)["end_state"] == "success"


# ------------------------------------------------------------------ extend-deadline


def test_extend_moves_the_kill_deadline(stack: Stack, running: tuple[str, str]) -> None:
    session, call_id = running
    before = stack.call(session, call_id)["kill_remaining"]
    resp = stack.api("POST", _path(session, call_id, "extend-deadline"), json={"seconds": 5})
    assert resp.status_code == 202, resp.text
    body = resp.json()
    assert body["status"] == "accepted" and body["tool_call_id"] == call_id
    assert body["kill_remaining"] > before + 4


def test_extend_beyond_the_tool_maximum_is_409_and_changes_nothing(
    stack: Stack, running: tuple[str, str]
) -> None:
    session, call_id = running
    path = _path(session, call_id, "extend-deadline")
    resp = stack.api("POST", path, json={"seconds": MAX_TIMEOUT})
    assert resp.status_code == 409
    assert f"maximum of {MAX_TIMEOUT} s" in resp.json()["detail"]
    assert stack.call(session, call_id)["kill_remaining"] <= 10
    no_limit = stack.api("POST", path, json={"no_deadline": True})
    assert no_limit.status_code == 409
    assert "cannot run without a deadline" in no_limit.json()["detail"]


def test_offload_deadline_can_be_set_and_removed(stack: Stack, running: tuple[str, str]) -> None:
    session, call_id = running
    path = _path(session, call_id, "extend-deadline")
    set_ = stack.api("POST", path, json={"seconds": 60, "target": "offload"})
    assert set_.status_code == 202 and 55 < set_.json()["offload_remaining"] <= 60
    removed = stack.api("POST", path, json={"no_deadline": True, "target": "offload"})
    assert removed.status_code == 202 and removed.json()["offload_remaining"] is None


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"seconds": 0},
        {"seconds": -3},
        {"seconds": "5"},
        {"seconds": True},
        {"seconds": [5]},
        {"seconds": 5, "target": "nope"},
        {"seconds": 5, "no_deadline": True},
        {"no_deadline": False},
        {"no_deadline": "yes"},
        {"seconds": 5, "extra": 1},
        # Stored as an offload time the API then showed as none.
        {"seconds": float("inf"), "target": "offload"},
        {"seconds": float("nan")},
        {"seconds": 1e308, "target": "offload"},
    ],
    ids=[
        "empty",
        "zero",
        "negative",
        "string",
        "bool",
        "list",
        "unknown-target",
        "both",
        "neither",
        "no-deadline-string",
        "unknown-field",
        "infinity",
        "nan",
        "past-a-year",
    ],
)
def test_bad_extend_bodies_are_422_and_change_nothing(
    stack: Stack, running: tuple[str, str], body: dict[str, object]
) -> None:
    session, call_id = running
    before = stack.call(session, call_id)
    resp = stack.api(
        "POST",
        _path(session, call_id, "extend-deadline"),
        content=json.dumps(body),  # as Python writes them: Infinity and NaN too
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 422, resp.text
    after = stack.call(session, call_id)
    assert after["kill_remaining"] <= before["kill_remaining"]
    assert after["offload_remaining"] is None


# ------------------------------------------------------------------ cancel / offload bodies


@pytest.mark.parametrize(
    "body",
    [{"force": "yes"}, {"force": 1}, {"force": None}, {"unknown": True}, [True]],
    ids=["string", "int", "null", "unknown-field", "list"],
)
def test_bad_cancel_bodies_are_422_and_the_call_keeps_running(
    stack: Stack, running: tuple[str, str], body: object
) -> None:
    session, call_id = running
    resp = stack.api("POST", _path(session, call_id, "cancel"), json=body)
    assert resp.status_code == 422, resp.text
    assert stack.call(session, call_id)["status"] == "running"


def test_offload_twice_is_409_the_second_time(stack: Stack) -> None:
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    session, task_id, call = stack.start_shell(gated(gate, "echo started"))
    call_id = call["tool_call_id"]
    first = stack.api("POST", _path(session, call_id, "offload"))
    assert first.status_code == 202
    assert stack.call(session, call_id)["status"] == "offloaded"
    second = stack.api("POST", _path(session, call_id, "offload"))
    assert second.status_code == 409
    later = stack.api(
        "POST", _path(session, call_id, "extend-deadline"), json={"seconds": 5, "target": "offload"}
    )
    assert later.status_code == 409
    stack.wait_task(task_id)
    # The result wakes the session for one more turn: let it finish before the next test
    # scripts the model.
    stack.model.script({"text": "noted"})
    open_gate(stack, gate)
    wait_for(
        lambda: stack.messages(session)[-1]["message"].get("content") == "noted",
        what="the wake-up turn",
    )


def test_malformed_json_body_is_422(stack: Stack, running: tuple[str, str]) -> None:
    session, call_id = running
    resp = stack.api(
        "POST",
        _path(session, call_id, "extend-deadline"),
        content=b"{seconds:",
        headers={"Content-Type": "application/json"},
    )
    assert resp.status_code == 422


@pytest.mark.parametrize("body", [b"{this is not json", b"[1,", b"\xff\xfe"])
def test_a_broken_body_on_a_route_that_takes_none_is_422_and_acts_not(
    stack: Stack, running: tuple[str, str], body: bytes
) -> None:
    """The offload (and the stop, the cron resume, the MCP toggle) ignored its body and
    acted, broken as it was."""
    session, call_id = running
    headers = {"content-type": "application/json"}
    resp = stack.api("POST", _path(session, call_id, "offload"), content=body, headers=headers)
    assert resp.status_code == 422, resp.text
    assert "not valid JSON" in resp.text
    assert stack.call(session, call_id)["status"] == "running"
    stopping = f"/api/console/chat/stop?chat_id={session}"
    stop = stack.api("POST", stopping, content=body, headers=headers)
    assert stop.status_code == 422, stop.text
    assert stack.call(session, call_id)["status"] == "running"
