"""Asking a person: pending approvals, approve / deny, cancel and stop, the chat stream,
user rules applied at once, and restarts failing closed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from core_support import Stack, sse_events, stack_for_module
from governance_support import (
    CLOCK,
    audit,
    decide,
    first_pending,
    marks_dir,
    pending,
    put_rules,
    script,
    sent_tool_results,
    shell,
    submit,
    tool_messages,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("gov-approvals")


@pytest.fixture
def marks(stack: Stack) -> Path:
    return marks_dir(stack)


def _only_call(task: dict[str, Any]) -> dict[str, Any]:
    (message,) = tool_messages(task)
    return message


def _told(stack: Stack) -> str:
    return sent_tool_results(stack)[-1]


@pytest.mark.p0
def test_strict_asks_even_for_the_clock_and_approval_runs_it(stack: Stack) -> None:
    script(stack, CLOCK)
    session = "gov-approve"
    task_id = submit(stack, session, "strict")

    approval = first_pending(stack, session)
    assert approval["tool_name"] == "get_current_time"
    assert approval["findings"] == []
    assert approval["expires_at"] - approval["created_at"] == pytest.approx(300, abs=1)
    assert approval in pending(stack)  # the unfiltered list has it too
    info = stack.call(session, approval["tool_call_id"])
    assert info["status"] == "awaiting_approval"
    listed = stack.api("GET", f"/api/tool-calls/{session}").json()["items"]
    assert [c["status"] for c in listed] == ["awaiting_approval"]

    status, body = decide(stack, "approve", approval)
    assert (status, body) == (
        200,
        {
            "success": True,
            "message": "Tool 'get_current_time' approved, executing...",
            "tool_name": "get_current_time",
            "request_id": approval["request_id"],
            "remembered": None,  # scope "once" by default: nothing is remembered
        },
    )
    task = stack.wait_task(task_id)

    assert task["result"]["status"] == "completed"
    assert stack.call(session, approval["tool_call_id"])["end_state"] == "success"
    assert "denied" not in _told(stack)
    assert decide(stack, "approve", approval)[0] == 404  # already decided
    (entry,) = audit(stack, session)
    assert entry["verdict"] == "ask"
    assert (entry["outcome"], entry["decided_by"]) == ("allowed", "user")
    assert entry["request_id"] == approval["request_id"]
    stack.model.assert_valid()


@pytest.mark.p0
def test_denied_call_does_not_run_and_the_model_is_told(stack: Stack, marks: Path) -> None:
    marker = marks / "ran"
    script(stack, shell(f"touch {marker}"))
    session = "gov-deny"
    task_id = submit(stack, session, "strict")

    approval = first_pending(stack, session)
    status, body = decide(stack, "deny", approval, reason="not on a Friday")
    assert status == 200 and body["success"] is True
    task = stack.wait_task(task_id)

    assert task["result"]["status"] == "completed"  # the turn goes on
    assert not marker.exists()
    assert stack.call(session, approval["tool_call_id"])["end_state"] == "denied"
    told = _told(stack)
    assert "A person denied this call" in told
    assert "not on a Friday" in told
    assert "Do not retry" in told
    (entry,) = audit(stack, session)
    assert (entry["verdict"], entry["outcome"], entry["decided_by"]) == ("ask", "denied", "user")
    stack.model.assert_valid()


@pytest.mark.p0
def test_another_session_cannot_decide_and_unknown_requests_are_404(stack: Stack) -> None:
    script(stack, CLOCK)
    session = "gov-owner"
    task_id = submit(stack, session, "strict")
    approval = first_pending(stack, session)

    assert decide(stack, "approve", {**approval, "session_id": "gov-intruder"})[0] == 403
    assert decide(stack, "deny", {**approval, "session_id": "gov-intruder"})[0] == 403
    assert decide(stack, "approve", {**approval, "request_id": "no-such-request"})[0] == 404
    assert pending(stack, session) == [approval]  # untouched

    assert decide(stack, "deny", approval)[0] == 200
    stack.wait_task(task_id)


@pytest.mark.p0
def test_cancelling_a_call_awaiting_approval_denies_it(stack: Stack, marks: Path) -> None:
    marker = marks / "ran"
    script(stack, shell(f"touch {marker}"))
    session = "gov-cancel"
    task_id = submit(stack, session, "strict")
    approval = first_pending(stack, session)

    call_id = approval["tool_call_id"]
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/cancel")
    assert resp.status_code == 202, resp.text
    task = stack.wait_task(task_id)

    assert task["result"]["status"] == "completed"
    assert not marker.exists()
    assert stack.call(session, call_id)["end_state"] == "denied"
    assert "cancelled" in _only_call(task)["content"]
    assert pending(stack, session) == []
    assert decide(stack, "approve", approval)[0] == 404
    (entry,) = audit(stack, session)
    assert (entry["outcome"], entry["decided_by"]) == ("denied", "cancel")


@pytest.mark.p1
def test_stopping_the_task_denies_its_pending_approval(stack: Stack, marks: Path) -> None:
    marker = marks / "ran"
    script(stack, shell(f"touch {marker}"))
    session = "gov-stop"
    task_id = submit(stack, session, "strict")
    approval = first_pending(stack, session)

    resp = stack.api("POST", f"/api/console/chat/task/{task_id}/stop")
    assert resp.status_code == 200 and resp.json()["stopped"] is True
    task = stack.wait_task(task_id)

    assert task["result"]["status"] == "cancelled"
    assert not marker.exists()
    assert pending(stack, session) == []
    assert stack.call(session, approval["tool_call_id"])["end_state"] == "denied"
    (entry,) = audit(stack, session)
    assert (entry["outcome"], entry["decided_by"]) == ("denied", "cancel")


@pytest.mark.p1
def test_session_setting_applies_when_the_request_names_no_level(stack: Stack) -> None:
    session = "gov-session-level"
    stack.model.script({"text": "hello"})
    stack.wait_task(submit(stack, session))
    resp = stack.api("PUT", f"/api/chats/{session}/settings", json={"approval_level": "Strict"})
    assert resp.status_code == 200, resp.text
    bad = stack.api("PUT", f"/api/chats/{session}/settings", json={"approval_level": "paranoid"})
    assert bad.status_code == 422 and "off, auto, smart, strict" in bad.text

    script(stack, CLOCK)
    task_id = submit(stack, session)  # no level: the session's strict applies
    approval = first_pending(stack, session)
    assert decide(stack, "approve", approval)[0] == 200
    stack.wait_task(task_id)

    script(stack, CLOCK)
    task = stack.wait_task(submit(stack, session, "auto"))  # request wins
    assert stack.call(session, _only_call(task)["x_tether_call_id"])["end_state"] == "success"


@pytest.mark.p1
def test_the_chat_stream_carries_the_approval_request(stack: Stack) -> None:
    script(stack, CLOCK)
    session = "gov-stream"
    body = {
        "session_id": session,
        "input": [{"role": "user", "content": "what time is it?"}],
        "request_context": {"approval_level": "strict"},
    }
    seen: list[str] = []
    with httpx.stream(
        "POST",
        f"{stack.server.base_url}/api/console/chat?events=tether",
        json=body,
        headers={"Authorization": f"Bearer {stack.server.token}"},
        timeout=20.0,
    ) as resp:
        assert resp.status_code == 200
        for frame in sse_events(resp.iter_lines()):
            event = frame.data
            seen.append(event["type"])
            if event["type"] == "approval_requested":
                approval = event["approval"]
                assert approval in pending(stack, session)
                assert decide(stack, "approve", approval)[0] == 200
            if event["type"] == "final":
                break
    assert seen.index("tool_call_started") < seen.index("approval_requested")
    assert seen.index("approval_requested") < seen.index("approval_resolved")
    assert seen.index("approval_resolved") < seen.index("tool_call_ended")


@pytest.mark.p0
def test_user_rules_apply_to_the_next_call_and_bad_ones_are_rejected(
    stack: Stack, marks: Path
) -> None:
    rule = {
        "id": "no-echo",
        "severity": "critical",
        "description": "echo is banned in this test",
        "command": ["echo"],
    }
    try:
        resp = put_rules(stack, [rule])
        assert resp.status_code == 200, resp.text
        assert [r["id"] for r in resp.json()["user"]] == ["no-echo"]
        marker = marks / "ran"
        script(stack, shell(f"echo hi > {marker}"))
        session = "gov-user-rule"

        task = stack.wait_task(submit(stack, session, "off"))

        assert not marker.exists()
        assert stack.call(session, _only_call(task)["x_tether_call_id"])["end_state"] == "denied"
        assert "'no-echo'" in _told(stack)
        bad_rules = [
            {**rule, "severity": "apocalyptic"},
            {**rule, "id": "rm-recursive-system"},  # a built-in's id
            {**rule, "flags_any": "-n", "ops": ["read"]},
        ]
        for bad in bad_rules:
            resp = put_rules(stack, [bad])
            assert resp.status_code == 422, resp.text
            assert "invalid rules" in resp.text
        rules = stack.api("GET", "/api/governance/rules").json()
        assert [r["id"] for r in rules["user"]] == ["no-echo"]  # unchanged by the bad PUTs
        assert "rm-recursive-system" in {r["id"] for r in rules["builtin"]}
    finally:
        resp = put_rules(stack, [])
        assert resp.status_code == 200


@pytest.mark.p0
def test_restarts_deny_pending_approvals_and_keep_user_rules(stack: Stack) -> None:
    rule = {"id": "keep-me", "severity": "LOW", "description": "persisted", "command": ["true"]}
    assert put_rules(stack, [rule]).status_code == 200
    # Under the keeper (the default) a graceful stop leaves the turn unfinished and the
    # start resumes it, as after a crash: either way the request is denied by the
    # restart, the call recorded denied (it never ran), and the model told why. (A
    # graceful stop once recorded it cancelled "the task was stopped" by nobody, and the
    # model was told it was stopped with its output above; a crash, cancelled with "no
    # result"; a cron run then counted no denial.)
    for session, stop in (("gov-restart", stack.server.stop), ("gov-crash", stack.server.kill)):
        script(stack, CLOCK)
        task_id = submit(stack, session, "strict")
        approval = first_pending(stack, session)
        stop()
        stack.server.start()
        assert pending(stack) == []
        assert decide(stack, "approve", approval)[0] == 404
        (entry,) = audit(stack, session)
        assert (entry["outcome"], entry["decided_by"]) == ("denied", "restart"), session
        call = stack.call(session, approval["tool_call_id"])
        assert (call["status"], call["end_state"]) == ("completed", "denied"), session
        # The turn must be over before the model is scripted again, or it could take
        # the next turn's replies.
        task = stack.wait_task(task_id)
        (told,) = tool_messages(task)
        assert "the server restarted while the call awaited approval" in told["content"]
        assert task["result"]["status"] == "completed"
    rules = stack.api("GET", "/api/governance/rules").json()
    assert [r["id"] for r in rules["user"]] == ["keep-me"]
