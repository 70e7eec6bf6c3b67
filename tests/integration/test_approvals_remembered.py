"""Remembered decisions through the API: similar approvals cover similar commands and
nothing more, ``always`` survives a restart and stops once revoked, a remembered deny
refuses, and a CRITICAL command is never approved by a rule."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from core_support import Stack, new_session, stack_for_module, wait_for
from cron_support import agent_job, create_job, history
from governance_support import (
    audit,
    decide,
    first_pending,
    pending,
    put_rules,
    script,
    shell,
    submit,
    tool_messages,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("remembered")


def _run(stack: Stack, session: str, command: str, level: str = "smart") -> str:
    """Have the model run ``command`` in a background turn; returns the task id."""
    script(stack, shell(command))
    return submit(stack, session, level)


def _ran_without_asking(stack: Stack, session: str, task_id: str) -> dict[str, Any]:
    task = stack.wait_task(task_id)
    assert not pending(stack, session)
    (message,) = tool_messages(task)
    assert stack.call(session, message["x_tether_call_id"])["end_state"] != "denied"
    return task


def _remembered(stack: Stack) -> list[dict[str, Any]]:
    resp = stack.api("GET", "/api/governance/rules")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["remembered"])


@pytest.mark.p0
def test_similar_covers_other_branches_but_still_asks_for_a_force_push(stack: Stack) -> None:
    session = new_session()
    first = _run(stack, session, "git push origin main")
    approval = first_pending(stack, session)
    assert approval["patterns"] == {
        "exact": "git push origin main",
        "similar": "git push origin *",
    }
    status, body = decide(stack, "approve", approval, scope="similar")
    assert status == 200, body
    assert body["remembered"]["pattern"] == "git push origin *"
    stack.wait_task(first)

    _ran_without_asking(stack, session, _run(stack, session, "git push origin dev"))

    forced = _run(stack, session, "git push --force origin main")
    again = first_pending(stack, session)
    assert again["patterns"]["exact"] == "git push --force origin main"
    assert decide(stack, "deny", again)[0] == 200
    stack.wait_task(forced)
    # ":main" is one plain word too, and deletes the remote branch: a finding of its own.
    deleting = _run(stack, session, "git push origin :main")
    assert decide(stack, "deny", first_pending(stack, session))[0] == 200
    stack.wait_task(deleting)
    decisions = [(e["decided_by"], e["rule_id"]) for e in reversed(audit(stack, session))]
    rule_id = body["remembered"]["id"]
    assert decisions == [("user", None), ("remembered", rule_id), ("user", None), ("user", None)]
    # A session's rule applies to its session only.
    other = new_session()
    task_id = _run(stack, other, "git push origin dev")
    assert decide(stack, "deny", first_pending(stack, other))[0] == 200
    stack.wait_task(task_id)


def test_always_survives_a_restart_and_stops_once_revoked(stack: Stack) -> None:
    session = new_session()
    task_id = _run(stack, session, "git push origin release")
    approval = first_pending(stack, session)
    status, body = decide(stack, "approve", approval, scope="exact", remember="always")
    assert status == 200, body
    stack.wait_task(task_id)
    rule_id = body["remembered"]["id"]

    stack.server.restart()

    (rule,) = [r for r in _remembered(stack) if r["id"] == rule_id]
    assert (rule["scope"], rule["session_id"], rule["pattern"]) == (
        "exact",
        None,
        "git push origin release",
    )
    elsewhere = new_session()
    _ran_without_asking(stack, elsewhere, _run(stack, elsewhere, "git push origin release"))

    resp = stack.api("DELETE", f"/api/governance/rules/remembered/{rule_id}")
    assert resp.status_code == 200, resp.text
    assert rule_id not in [r["id"] for r in resp.json()["remembered"]]
    assert stack.api("DELETE", f"/api/governance/rules/remembered/{rule_id}").status_code == 404
    task_id = _run(stack, elsewhere, "git push origin release")
    assert decide(stack, "deny", first_pending(stack, elsewhere))[0] == 200
    stack.wait_task(task_id)


def test_a_remembered_deny_refuses_similar_calls(stack: Stack) -> None:
    session = new_session()
    task_id = _run(stack, session, "echo refuse this", "strict")
    status, _ = decide(stack, "deny", first_pending(stack, session), scope="similar")
    assert status == 200
    stack.wait_task(task_id)

    task = stack.wait_task(_run(stack, session, "echo refuse that", "strict"))
    (message,) = tool_messages(task)
    assert "echo refuse *" in message["content"]
    assert not pending(stack, session)


@pytest.mark.parametrize("remember", ["session", "always"])
def test_a_remembered_deny_refuses_a_call_the_policy_would_let_through(
    stack: Stack, remember: str
) -> None:
    """Denied and remembered at ``strict``, then the level lowered: the call ran (the
    denials were consulted only for calls that would ask). It is refused, and the model
    is told the reason the person gave."""
    session = new_session()
    flag = f"deployed-{remember}.flag"
    task_id = _run(stack, session, f"touch {flag}", "strict")
    reason = "never create that flag"
    approval = first_pending(stack, session)
    status, _ = decide(stack, "deny", approval, scope="exact", remember=remember, reason=reason)
    assert status == 200
    stack.wait_task(task_id)

    for level in ("auto", "off"):
        task = stack.wait_task(_run(stack, session, f"touch {flag}", level))
        (message,) = tool_messages(task)
        assert f"touch {flag}" in message["content"] and reason in message["content"]
        assert stack.call(session, message["x_tether_call_id"])["end_state"] == "denied"
    assert not (stack.workspace / flag).exists()
    assert [e["decided_by"] for e in audit(stack, session)][:2] == ["remembered"] * 2
    # Another command still runs at that level.
    _ran_without_asking(stack, session, _run(stack, session, "echo still fine", "auto"))


def test_a_critical_command_is_never_auto_approved(stack: Stack) -> None:
    # A user rule makes a harmless command CRITICAL, so a failure here runs nothing bad.
    critical = {
        "id": "it-forbidden-echo",
        "severity": "CRITICAL",
        "description": "echo of a forbidden word",
        "command": ["echo"],
        "args_any": ["forbidden"],
    }
    assert put_rules(stack, [critical]).status_code == 200
    try:
        session = new_session()
        task_id = _run(stack, session, "echo hello world", "strict")
        approval = first_pending(stack, session)
        _, body = decide(stack, "approve", approval, scope="similar", remember="always")
        assert body["remembered"]["pattern"] == "echo hello *"
        stack.wait_task(task_id)

        task = stack.wait_task(_run(stack, session, "echo hello forbidden", "strict"))
        (message,) = tool_messages(task)
        assert "it-forbidden-echo" in message["content"]
        assert stack.call(session, message["x_tether_call_id"])["end_state"] == "denied"
        latest = audit(stack, session)[0]
        assert (latest["decided_by"], latest["rule_id"]) == ("policy", None)
    finally:
        put_rules(stack, [])
        for rule in _remembered(stack):
            stack.api("DELETE", f"/api/governance/rules/remembered/{rule['id']}")


def test_bad_scopes_are_refused_and_change_nothing(stack: Stack) -> None:
    session = new_session()
    task_id = _run(stack, session, "echo piped | cat", "strict")
    approval = first_pending(stack, session)
    assert approval["patterns"]["similar"] is None
    for extra in ({"scope": "similar"}, {"scope": "wide"}, {"remember": "forever"}):
        status, body = decide(stack, "approve", approval, **extra)
        assert status == 422, body
    assert pending(stack, session) == [approval]
    assert decide(stack, "approve", approval)[0] == 200
    stack.wait_task(task_id)


def test_a_sessions_decisions_go_with_it(stack: Stack) -> None:
    """Session ids are the clients' (and a cron job's is its id): a conversation made
    later under a deleted one's id ran what nobody approved for it."""
    session = new_session()
    task_id = _run(stack, session, "git push origin reused")
    status, body = decide(stack, "approve", first_pending(stack, session), scope="exact")
    assert status == 200, body
    stack.wait_task(task_id)
    rule_id = body["remembered"]["id"]
    assert stack.api("DELETE", f"/api/chats/{session}").status_code == 200
    assert rule_id not in [r["id"] for r in _remembered(stack)]
    task_id = _run(stack, session, "git push origin reused")
    assert decide(stack, "deny", first_pending(stack, session))[0] == 200
    stack.wait_task(task_id)


def test_a_cron_jobs_decisions_go_with_it(stack: Stack) -> None:
    job = agent_job("remembered-job", approval_level="smart", when_unattended="wait")
    create_job(stack.server, job)
    script(stack, shell("git push origin nightly"))
    assert stack.api("POST", "/api/cron/jobs/remembered-job/run").status_code == 200
    session = "cron:remembered-job"
    status, body = decide(stack, "approve", first_pending(stack, session), scope="exact")
    assert status == 200, body
    (rule,) = [r for r in _remembered(stack) if r["id"] == body["remembered"]["id"]]
    assert rule["session_id"] == session
    wait_for(lambda: history(stack.server, "remembered-job")[0]["status"] != "running")
    # Pointed elsewhere before it is deleted: its own session's rules still go with it.
    moved = {**job, "dispatch": {"target": {"user_id": "cron", "session_id": new_session()}}}
    assert stack.api("PUT", "/api/cron/jobs/remembered-job", json=moved).status_code == 200
    assert stack.api("DELETE", "/api/cron/jobs/remembered-job").status_code == 200
    assert body["remembered"]["id"] not in [r["id"] for r in _remembered(stack)]
