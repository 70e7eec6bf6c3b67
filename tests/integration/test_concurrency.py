"""Twenty sessions at once: each sees only its own calls and messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from core_support import SHELL, Stack, gated, open_gate, stack_for_module, wait_for
from helpers import MockLLMHandler

pytestmark = pytest.mark.integration

SESSIONS = 20
GATE = "all-go"


class EchoSessionHandler(MockLLMHandler):
    """A fake model that answers each session in its own words: it runs a shell command
    echoing the user's text, then replies with the text it got back."""

    def _next_reply(self, srv: Any, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        user_text = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if results:
            return {"text": f"{user_text} -> {results[-1].splitlines()[1]}"}
        command = gated(GATE, f"echo started-{user_text}", f"echo {user_text}")
        return {"tool_calls": [(SHELL, json.dumps({"command": command}))]}


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    for stack in stack_for_module("concurrency"):
        stack.model.srv.RequestHandlerClass = EchoSessionHandler
        yield stack


def test_twenty_sessions_at_once_stay_isolated(stack: Stack) -> None:
    sessions = {f"console:iso-{i:02d}": f"tag{i:02d}" for i in range(SESSIONS)}
    tasks = {sid: stack.submit(tag, sid) for sid, tag in sessions.items()}
    # Every session has exactly its own call in flight, all at the same time.
    for sid, tag in sessions.items():
        calls = wait_for(lambda sid=sid: stack.live_calls(sid), what=f"{sid}'s call")
        assert len(calls) == 1
        assert f"echo {tag}" in calls[0]["extra"]["arguments"]["command"]
        assert calls[0]["session_id"] == sid
    assert sum(len(stack.live_calls(sid)) for sid in sessions) == SESSIONS
    busy = {s["id"] for s in stack.api("GET", "/api/chats").json() if s["status"] == "running"}
    assert set(sessions) <= busy
    open_gate(stack, GATE)
    for sid, tag in sessions.items():
        task = stack.wait_task(tasks[sid])
        expected = {"status": "completed", "text": f"{tag} -> {tag}", "steps": 2}
        assert task["result"] == {**expected, "session_id": sid}
        texts = json.dumps([m["message"] for m in stack.messages(sid)])
        others = [t for t in sessions.values() if t != tag and t in texts]
        assert not others, f"{sid} sees {others}"
        out = stack.api(
            "GET",
            f"/api/tool-calls/{sid}/{task['messages'][1]['tool_calls'][0]['x_tether_call_id']}/output",
        ).json()
        assert out["content"][0]["text"] == f"started-{tag}\n{tag}\n"
    stack.model.assert_valid()
    assert len(stack.model.requests) >= 2 * SESSIONS
