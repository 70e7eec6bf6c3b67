"""Each webhook event is sent when its moment comes: an approval that expires, a call
that ends in the background, a cron run that fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from core_support import Stack, gated, new_session, open_gate, shell_call, stack_for_module
from cron_support import agent_job, create_job, wait_runs_finished
from governance_support import CLOCK, first_pending, script, submit
from webhook_support import Receiver, fresh_receiver, subscribe

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module(
        "webhook-events",
        TETHER_APPROVAL_TIMEOUT_SECONDS="1",
        TETHER_WEBHOOK_RETRY_FIRST_SECONDS="0.05",
    )


@pytest.fixture
def receiver(stack: Stack) -> Iterator[Receiver]:
    with fresh_receiver(stack) as receiver:
        yield receiver


def _events(receiver: Receiver, event: str) -> list[dict[str, object]]:
    got = receiver.wait(lambda r: any(x.event == event for x in r))
    assert all(r.signature_ok for r in got)
    return [r.body["data"] for r in got if r.event == event]


def test_an_expired_approval_is_sent_after_its_request(stack: Stack, receiver: Receiver) -> None:
    subscribe(stack, receiver, "approval.requested", "approval.expired")
    session = new_session()
    script(stack, CLOCK)
    task_id = submit(stack, session, "strict")
    request_id = first_pending(stack, session)["request_id"]

    (expired,) = _events(receiver, "approval.expired")

    assert expired["request_id"] == request_id
    assert [r.event for r in receiver.received] == ["approval.requested", "approval.expired"]
    stack.wait_task(task_id)


def test_a_call_ending_in_the_background_is_sent(stack: Stack, receiver: Receiver) -> None:
    subscribe(stack, receiver, "tool_call.ended")
    session, task_id, call = stack.start_shell(
        gated("bg-gate", before="echo early", after="echo late")
    )
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call['tool_call_id']}/offload")
    assert resp.status_code == 202, resp.text
    stack.wait_task(task_id)
    assert not receiver.received  # the call still runs

    open_gate(stack, "bg-gate")
    (ended,) = _events(receiver, "tool_call.ended")

    assert ended["tool_call_id"] == call["tool_call_id"]
    assert (ended["session_id"], ended["end_state"]) == (session, "success")


def test_a_failed_cron_run_is_sent(stack: Stack, receiver: Receiver) -> None:
    subscribe(stack, receiver, "cron.run_failed")
    stack.model.script(
        shell_call(gated("never-opened", before="echo started")), {"text": "unreachable"}
    )
    create_job(stack.server, agent_job("too-slow", approval_level="off", timeout_seconds=1))
    assert stack.api("POST", "/api/cron/jobs/too-slow/run").status_code == 200

    (run,) = wait_runs_finished(stack.server, "too-slow")
    (failed,) = _events(receiver, "cron.run_failed")

    assert failed == {
        "job_id": "too-slow",
        "run_id": run["run_id"],
        "status": "timeout",
        "error": run["error"],
    }
