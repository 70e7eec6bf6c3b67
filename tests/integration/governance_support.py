"""Governance helpers for the integration tests, on top of core_support's Stack."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from core_support import SHELL, Stack, chat_body, wait_for


def marks_dir(stack: Stack) -> Path:
    """A fresh directory in the workspace for "it ran" markers: shell calls run in the
    sandbox, whose /tmp is its own, so a marker elsewhere would never appear and a test
    that it did not run could not fail."""
    directory = stack.workspace / f"marks-{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    return directory


def shell(command: str) -> tuple[str, str]:
    """One scripted call of the shell tool, as (name, arguments)."""
    return (SHELL, json.dumps({"command": command}))


CLOCK = ("get_current_time", "{}")


def script(stack: Stack, *calls: tuple[str, str]) -> None:
    """The model calls ``calls`` in one reply (in parallel), then answers with text."""
    stack.model.script({"tool_calls": list(calls)}, {"text": "finished"})


def submit(stack: Stack, session_id: str, level: str | None = None) -> str:
    """Start a turn, with ``level`` as the request's approval level if given."""
    extra = {"request_context": {"approval_level": level}} if level is not None else {}
    resp = stack.api("POST", "/api/console/chat/task", json=chat_body("go", session_id, **extra))
    assert resp.status_code == 200, resp.text
    return str(resp.json()["task_id"])


def tool_messages(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in task["messages"] if m.get("role") == "tool"]


def end_state(stack: Stack, session_id: str, message: dict[str, Any]) -> str | None:
    """How the call behind a tool message ended, as the tool-calls API says."""
    return stack.call(session_id, message["x_tether_call_id"])["end_state"]


def pending(stack: Stack, session_id: str | None = None) -> list[dict[str, Any]]:
    params = {"session_id": session_id} if session_id else {}
    resp = stack.api("GET", "/api/approval/list", params=params)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["count"] == len(body["pending_approvals"])
    return list(body["pending_approvals"])


def first_pending(stack: Stack, session_id: str) -> dict[str, Any]:
    """The session's first pending approval, once there is one."""
    return wait_for(
        lambda: (pending(stack, session_id) or [None])[0], what=f"an approval in {session_id}"
    )


def decide(
    stack: Stack, verb: str, approval: dict[str, Any], **extra: Any
) -> tuple[int, dict[str, Any]]:
    """POST /api/approval/{approve|deny} for ``approval``; (status, body)."""
    body = {"request_id": approval["request_id"], "session_id": approval["session_id"], **extra}
    resp = stack.api("POST", f"/api/approval/{verb}", json=body)
    return resp.status_code, resp.json()


def audit(stack: Stack, session_id: str) -> list[dict[str, Any]]:
    resp = stack.api("GET", "/api/governance/audit", params={"session_id": session_id})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


def put_rules(stack: Stack, rules: list[dict[str, Any]]) -> Any:
    return stack.api("PUT", "/api/governance/rules", json={"rules": rules})


def sent_tool_results(stack: Stack) -> list[str]:
    """The tool messages in the model's latest request: what it was told."""
    messages = stack.model.requests[-1]["messages"]
    return [str(m["content"]) for m in messages if m["role"] == "tool"]
