"""/api/console/chat (tasks and the SSE turn) and /api/chats, through a real server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from core_support import (
    Stack,
    chat_body,
    gated,
    new_session,
    open_gate,
    shell_call,
    sse_events,
    stack_for_module,
    wait_for,
)
from helpers import register_mock_provider, unregister_mock_provider

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # One retry, so a single provider failure is retried and two in a row are not.
    yield from stack_for_module("chat", TETHER_LLM_MAX_RETRIES="1")


@pytest.fixture(autouse=True)
def _every_request_valid(stack: Stack) -> Iterator[None]:
    yield
    stack.model.assert_valid()


# ------------------------------------------------------------------ submitting tasks


def test_a_task_runs_to_completed_with_its_messages(stack: Stack) -> None:
    session = new_session()
    stack.model.script({"text": "hello back"})
    task = stack.wait_task(stack.submit("hello", session))
    assert task["result"]["status"] == "completed"
    assert task["result"]["text"] == "hello back"
    assert task["trigger"] == "user" and task["session_id"] == session
    assert [m["role"] for m in task["messages"]] == ["user", "assistant"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"input": []},
        {"input": [{"content": [{"type": "text", "text": "   "}]}]},
        {"input": [{"content": ""}]},
        {"input": "hello"},
        {"input": [{"role": "assistant", "content": "hi"}]},
        {"input": [{"content": "hi"}], "request_context": {"approval_level": "sometimes"}},
        {"input": [{"content": "hi"}], "session_id": ""},
    ],
    ids=[
        "missing-input",
        "empty-input",
        "blank-text",
        "empty-string",
        "input-not-list",
        "not-user",
        "unknown-level",
        "empty-session",
    ],
)
def test_bad_task_bodies_are_422_and_start_nothing(stack: Stack, body: dict[str, object]) -> None:
    before = len(stack.api("GET", "/api/chats").json())
    resp = stack.api("POST", "/api/console/chat/task", json=body)
    assert resp.status_code == 422, resp.text
    assert len(stack.api("GET", "/api/chats").json()) == before


def test_malformed_json_is_422(stack: Stack) -> None:
    resp = stack.api(
        "POST",
        "/api/console/chat/task",
        content=b'{"input": [',
        headers={"Content-Type": "application/json"},
    )
    assert resp.status_code == 422


def test_unknown_level_error_names_the_levels(stack: Stack) -> None:
    body = chat_body("hi", new_session(), request_context={"approval_level": "sometimes"})
    resp = stack.api("POST", "/api/console/chat/task", json=body)
    assert resp.status_code == 422
    assert "sometimes" in resp.text


def test_get_unknown_task_404(stack: Stack) -> None:
    assert stack.api("GET", "/api/console/chat/task/nope").status_code == 404
    assert stack.api("POST", "/api/console/chat/task/nope/stop").status_code == 404


def test_stop_a_running_task_cancels_it_and_its_call(stack: Stack) -> None:
    session, task_id, call = stack.start_shell("sleep 30")
    resp = stack.api("POST", f"/api/console/chat/task/{task_id}/stop")
    assert resp.status_code == 200 and resp.json()["stopped"] is True
    task = stack.wait_task(task_id, timeout=10)
    assert task["result"]["status"] == "cancelled"
    done = stack.wait_completed(session, call["tool_call_id"])
    assert done["end_state"] == "cancelled"
    assert stack.live_calls(session) == []
    again = stack.api("POST", f"/api/console/chat/task/{task_id}/stop")
    assert again.status_code == 200 and again.json()["stopped"] is False


# ------------------------------------------------------------------ the SSE turn


def test_chat_stream_sends_the_turn_events_in_order(stack: Stack) -> None:
    session = new_session()
    stack.model.script(shell_call("echo streamed"), {"text": "all done"})
    with stack.server._client.stream(
        "POST",
        "/api/console/chat?events=tether",
        json=chat_body("go", session),
        headers={"Authorization": f"Bearer {stack.server.token}"},
    ) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = [e.data for e in sse_events(resp.iter_lines())]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "task" and events[0]["session_id"] == session
    assert kinds[1] == "task_started"
    assert kinds[-1] == "final" and events[-1]["result"]["status"] == "completed"
    for earlier, later in [
        ("tool_call_started", "tool_call_output"),
        ("tool_call_output", "tool_call_ended"),
        ("tool_call_ended", "text_delta"),
    ]:
        assert kinds.index(earlier) < kinds.index(later)
    output = next(e for e in events if e["type"] == "tool_call_output")
    assert output["text"] == "streamed\n" and output["stream"] == "stdout"
    ended = next(e for e in events if e["type"] == "tool_call_ended")
    assert ended["tool_call"]["end_state"] == "success"
    text = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert text == "all done"
    messages = [e for e in events if e["type"] == "message"]
    assert [m["kind"] for m in messages] == ["assistant", "tool", "assistant"]


def test_chat_stream_rejects_bad_bodies(stack: Stack) -> None:
    assert stack.api("POST", "/api/console/chat", json={"input": []}).status_code == 422


# ------------------------------------------------------------------ /api/chats


def test_sessions_list_messages_and_delete(stack: Stack) -> None:
    session = new_session()
    stack.model.script({"text": "first answer"})
    stack.wait_task(stack.submit("first question", session))
    sessions = {s["id"]: s for s in stack.api("GET", "/api/chats").json()}
    assert session in sessions
    assert sessions[session]["name"] == "first question"
    assert sessions[session]["status"] == "idle"
    messages = stack.messages(session)
    assert [m["kind"] for m in messages] == ["user", "assistant"]
    assert messages[1]["message"]["content"] == "first answer"
    assert stack.api("DELETE", f"/api/chats/{session}").status_code == 200
    assert stack.api("DELETE", f"/api/chats/{session}").status_code == 404
    assert stack.api("GET", f"/api/chats/{session}/messages").status_code == 404
    assert session not in {s["id"] for s in stack.api("GET", "/api/chats").json()}


def test_unknown_session_messages_404(stack: Stack) -> None:
    assert stack.api("GET", "/api/chats/console:nobody/messages").status_code == 404


def test_deleting_a_busy_chat_stops_its_turn_first(stack: Stack) -> None:
    """As QwenPaw does: the running turn and its calls are stopped, then the chat goes."""
    session, _task_id, _call = stack.start_shell("sleep 30")
    resp = stack.api("DELETE", f"/api/chats/{session}")
    assert resp.status_code == 200 and resp.json() == {"deleted": True}
    assert stack.api("GET", f"/api/chats/{session}/messages").status_code == 404
    assert stack.live_calls(session) == []


def test_session_settings(stack: Stack) -> None:
    session = new_session()
    stack.model.script({"text": "ok"})
    stack.wait_task(stack.submit("hi", session))
    ok = stack.api("PUT", f"/api/chats/{session}/settings", json={"approval_level": "strict"})
    assert ok.status_code == 200, ok.text
    bad = stack.api("PUT", f"/api/chats/{session}/settings", json={"approval_level": "nah"})
    assert bad.status_code == 422
    missing = stack.api("PUT", "/api/chats/console:none/settings", json={"approval_level": None})
    assert missing.status_code == 404
    level = {s["session_id"]: s for s in stack.api("GET", "/api/chats").json()}[session]
    assert level["approval_level"] == "strict"


# ------------------------------------------------------------------ provider failures


@pytest.mark.parametrize(
    "replies",
    [
        [{"status": 500, "message": "upstream exploded"}] * 2,
        [{"status": 429, "message": "slow down"}] * 2,
    ],
    ids=["500", "429"],
)
def test_provider_errors_fail_the_task_with_a_message(
    stack: Stack, replies: list[dict[str, object]]
) -> None:
    session = new_session()
    stack.model.script(*replies)
    task = stack.wait_task(stack.submit("hi", session))
    status = replies[0]["status"]
    assert task["result"]["status"] == "failed"
    assert f"answered {status}" in task["result"]["error"]["message"]
    assert replies[0]["message"] in task["result"]["error"]["message"]
    # The user's words were saved before the model was called.
    assert [m["kind"] for m in stack.messages(session)] == ["user"]


def test_a_broken_stream_fails_the_task_with_a_message(stack: Stack) -> None:
    session = new_session()
    stack.model.script({"text": "this reply will be cut off halfway through", "broken": True})
    task = stack.wait_task(stack.submit("hi", session))
    assert task["result"]["status"] == "failed"
    assert task["result"]["error"]
    assert "model provider" in task["result"]["error"]["message"]


def test_a_single_500_is_retried_and_the_task_completes(stack: Stack) -> None:
    session = new_session()
    stack.model.script({"status": 500}, {"text": "second time lucky"})
    task = stack.wait_task(stack.submit("hi", session))
    assert task["result"]["status"] == "completed"
    assert task["result"]["text"] == "second time lucky"


def test_no_usable_provider_fails_with_a_message(stack: Stack) -> None:
    unregister_mock_provider(stack.server)
    try:
        task = stack.wait_task(stack.submit("hi", new_session()))
        assert task["result"]["status"] == "failed"
        assert "no model is configured" in task["result"]["error"]["message"]
    finally:
        register_mock_provider(stack.server, stack.model.url)


def test_stopping_a_task_with_parallel_calls_just_started_leaves_none_running(
    stack: Stack,
) -> None:
    # Stop as soon as the calls are listed: some may not have a process yet.
    session = new_session()
    stack.model.script({"tool_calls": [("execute_shell_command", '{"command": "sleep 30"}')] * 4})
    task_id = stack.submit("go", session)
    wait_for(lambda: len(stack.live_calls(session)) == 4, what="four calls listed")
    assert stack.api("POST", f"/api/console/chat/task/{task_id}/stop").json()["stopped"] is True
    assert stack.wait_task(task_id)["result"]["status"] == "cancelled"
    wait_for(lambda: stack.live_calls(session) == [], timeout=5, what="no call left running")


def test_a_message_sent_while_a_call_runs_is_answered_after_that_turn(stack: Stack) -> None:
    """The second question is stored at once, among the first turn's messages: the first
    turn's result must stay, and the request for the second must end on it."""
    session = new_session()
    gate = f"queued-{uuid.uuid4().hex[:8]}"
    stack.model.script(
        shell_call(gated(gate, "echo started", "echo RESULT-A")),
        {"text": "done1"},
        {"text": "answer2"},
    )
    first = stack.submit("first question", session)
    stack.wait_call(session)
    second = stack.submit("second question", session)
    open_gate(stack, gate)
    assert stack.wait_task(first)["result"]["status"] == "completed"
    assert stack.wait_task(second)["result"]["status"] == "completed"
    stack.model.assert_valid()  # every request ends on a user or tool message
    sent = stack.model.requests[-1]["messages"]
    assert sent[-1]["role"] == "user" and "second question" in str(sent[-1]["content"])
    (result,) = [m["content"] for m in sent if m["role"] == "tool"]
    assert "RESULT-A" in result


def test_a_key_the_provider_quotes_in_its_error_is_masked_in_the_task(stack: Stack) -> None:
    """The message is the task's result, answered by the API and sent to webhooks; a
    gateway quoting a key of no known shape was kept in full."""
    (provider,) = [p for p in stack.api("GET", "/api/models").json() if p["is_custom"]]
    key = "gw_live_0123456789abcdef"
    configured = stack.api("PUT", f"/api/models/{provider['id']}/config", json={"api_key": key})
    assert configured.status_code == 200, configured.text
    try:
        stack.model.script({"status": 401, "message": f"Incorrect API key provided: {key}."})
        task = stack.wait_task(stack.submit("hi", new_session()))
    finally:
        stack.api("PUT", f"/api/models/{provider['id']}/config", json={"api_key": "sk-mock"})
    message = task["result"]["error"]["message"]
    assert "answered 401: Incorrect API key provided: ********." in message
    assert key not in str(task)
