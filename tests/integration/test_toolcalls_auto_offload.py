"""Automatic offload: a call still running at TETHER_OFFLOAD_AFTER_SECONDS goes to the
background on its own, and `extend-deadline` with target "offload" moves that moment."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from core_support import (
    Stack,
    gated,
    new_session,
    open_gate,
    scaled,
    shell_call,
    stack_for_module,
    wait_for,
)

pytestmark = pytest.mark.integration

# Wide enough for the test to reach the call (and extend it) before it passes on a
# loaded machine.
OFFLOAD_AFTER = scaled(3)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("auto-offload", TETHER_OFFLOAD_AFTER_SECONDS=f"{OFFLOAD_AFTER:g}")


@pytest.fixture(autouse=True)
def _every_request_valid(stack: Stack) -> Iterator[None]:
    yield
    stack.model.assert_valid()


def test_a_slow_call_moves_to_the_background_at_its_offload_deadline(stack: Stack) -> None:
    gate, session = "auto-1", new_session()
    stack.model.script(
        shell_call(gated(gate, "echo started", "echo finished")),
        {"text": "went on without it"},
        {"text": "saw the late result"},
    )
    task_id = stack.submit("run it", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    # Nobody touches the call: the deadline alone releases the turn.
    task = stack.wait_task(task_id)
    assert task["result"]["status"] == "completed"
    info = stack.call(session, call_id)
    assert info["status"] == "offloaded" and info["offload_reason"] == "deadline"
    open_gate(stack, gate)
    assert stack.wait_completed(session, call_id)["end_state"] == "success"
    # The late result wakes the session; its turn answers after the notification.
    wait_for(
        lambda: (
            [m for m in stack.messages(session) if m["kind"] == "notification"]
            and stack.messages(session)[-1]["message"].get("content") == "saw the late result"
        ),
        what="the woken turn",
    )


def test_extending_the_offload_deadline_keeps_the_call_in_the_turn(stack: Stack) -> None:
    gate, session = "auto-2", new_session()
    stack.model.script(shell_call(gated(gate, "echo started", "echo finished")), {"text": "ok"})
    task_id = stack.submit("run it", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    # The call started before it was listed, so its offload deadline is before this.
    old_deadline = time.monotonic() + OFFLOAD_AFTER
    resp = stack.api(
        "POST",
        f"/api/tool-calls/{session}/{call_id}/extend-deadline",
        json={"no_deadline": True, "target": "offload"},
    )
    assert resp.status_code == 202, resp.text
    assert resp.json()["offload_remaining"] is None
    # Past the old deadline the call is still in the turn.
    wait_for(lambda: time.monotonic() > old_deadline + 0.5, OFFLOAD_AFTER + 5, "the old deadline")
    info = stack.call(session, call_id)
    assert info["status"] == "running" and info["offload_remaining"] is None
    open_gate(stack, gate)
    done = stack.wait_completed(session, call_id)
    assert done["end_state"] == "success" and done["offload_reason"] is None
    assert stack.wait_task(task_id)["result"]["status"] == "completed"
