"""Approvals when nobody watches: a cron run's call that needs approval is refused at once
(and the run records it) unless the job says wait; sessions set their own policy, and a
streamed (attended) turn still asks."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from core_support import Stack, chat_body, shell_call, stack_for_module
from cron_support import agent_job, create_job, wait_runs_finished
from governance_support import (
    CLOCK,
    audit,
    decide,
    first_pending,
    pending,
    script,
    sent_tool_results,
    submit,
    tool_messages,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("unattended")


def _run_now(stack: Stack, job_id: str) -> None:
    resp = stack.api("POST", f"/api/cron/jobs/{job_id}/run")
    assert resp.status_code == 200, resp.text


@pytest.mark.p0
def test_a_cron_call_that_needs_approval_is_denied_at_once_and_recorded(stack: Stack) -> None:
    stack.model.script(shell_call("echo cron-was-here"), {"text": "could not"})
    job = create_job(stack.server, agent_job("nightly", approval_level="strict"))
    assert job["when_unattended"] is None  # the default for cron runs: deny
    _run_now(stack, "nightly")

    (run,) = wait_runs_finished(stack.server, "nightly")

    assert run["status"] == "success"
    assert "1 tool call(s) denied" in run["error"]
    told = sent_tool_results(stack)[-1]
    assert "'echo cron-was-here'" in told
    assert "when_unattended=deny" in told
    assert "approval level asks a person for every call" in told
    assert not pending(stack, "cron:nightly")
    (entry,) = audit(stack, "cron:nightly")
    assert (entry["outcome"], entry["decided_by"]) == ("denied", "unattended")
    assert not (stack.workspace / "cron-was-here").exists()


def test_a_cron_job_that_says_wait_waits_and_is_approvable(stack: Stack) -> None:
    stack.model.script(shell_call("echo approved > cron-waited"), {"text": "done"})
    job = agent_job("patient", approval_level="strict", when_unattended="wait")
    assert create_job(stack.server, job)["when_unattended"] == "wait"
    _run_now(stack, "patient")

    approval = first_pending(stack, "cron:patient")
    status, body = decide(stack, "approve", approval)
    assert status == 200, body

    (run,) = wait_runs_finished(stack.server, "patient")
    assert (run["status"], run["error"]) == ("success", None)
    assert (stack.workspace / "cron-waited").read_text() == "approved\n"


def test_a_bad_when_unattended_is_refused(stack: Stack) -> None:
    resp = stack.api("POST", "/api/cron/jobs", json=agent_job("bad", when_unattended="maybe"))
    assert resp.status_code == 422, resp.text
    assert stack.api("GET", "/api/cron/jobs/bad").status_code == 404


def _stream_in_background(stack: Stack, session: str) -> threading.Thread:
    body = chat_body("go", session, request_context={"approval_level": "strict"})
    thread = threading.Thread(target=lambda: stack.api("POST", "/api/console/chat", json=body))
    thread.start()
    return thread


def test_a_session_policy_denies_background_turns_but_a_watched_turn_asks(
    stack: Stack,
) -> None:
    session = "console:unattended-session"
    stack.model.script({"text": "hello"})
    stack.wait_task(stack.submit("hi", session))
    resp = stack.api("PUT", f"/api/chats/{session}/settings", json={"approval_level": "strict"})
    assert resp.status_code == 200, resp.text
    resp = stack.api("PUT", f"/api/chats/{session}/settings", json={"when_unattended": "deny"})
    assert resp.json() == {
        "session_id": session,
        "approval_level": "strict",  # left as it was
        "when_unattended": "deny",
        "sandbox": {},  # the server's sandbox defaults
    }

    script(stack, CLOCK)
    task = stack.wait_task(submit(stack, session))
    (message,) = tool_messages(task)
    assert "when_unattended=deny" in message["content"]

    script(stack, CLOCK)
    streaming = _stream_in_background(stack, session)
    approval = first_pending(stack, session)  # someone is watching: it asks
    assert decide(stack, "approve", approval)[0] == 200
    streaming.join(30)
    assert not streaming.is_alive()
    decisions = [(e["outcome"], e["decided_by"]) for e in audit(stack, session)]
    assert decisions == [("allowed", "user"), ("denied", "unattended")]


def test_session_settings_validate_and_change_nothing_when_bad(stack: Stack) -> None:
    session = "console:unattended-validate"
    stack.model.script({"text": "hello"})
    stack.wait_task(stack.submit("hi", session))
    path = f"/api/chats/{session}/settings"
    assert stack.api("PUT", path, json={"when_unattended": "wait"}).status_code == 200
    for body in ({"when_unattended": "later"}, {"nope": 1}):
        resp: Any = stack.api("PUT", path, json=body)
        assert resp.status_code == 422, resp.text
    sessions = {s["session_id"]: s for s in stack.api("GET", "/api/chats").json()}
    assert sessions[session]["when_unattended"] == "wait"
    assert stack.api("PUT", path, json={"when_unattended": None}).json()["when_unattended"] is None
