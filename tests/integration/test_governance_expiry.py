"""An approval no one answers expires and the call is denied (server default level strict)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from core_support import Stack, scaled, stack_for_module
from governance_support import (
    CLOCK,
    audit,
    end_state,
    first_pending,
    pending,
    script,
    sent_tool_results,
    submit,
    tool_messages,
)

pytestmark = pytest.mark.integration

# Wide enough for the test to see the request pending before it expires on a loaded
# machine.
EXPIRY = scaled(3)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module(
        "gov-expiry",
        TETHER_APPROVAL_TIMEOUT_SECONDS=f"{EXPIRY:g}",
        TETHER_DEFAULT_APPROVAL_LEVEL="strict",
    )


@pytest.mark.p0
def test_unanswered_approval_expires_and_denies_the_call(stack: Stack) -> None:
    script(stack, CLOCK)
    session = "gov-expiry"
    task_id = submit(stack, session)  # no level anywhere: the server default applies

    approval = first_pending(stack, session)
    assert approval["expires_at"] - approval["created_at"] == pytest.approx(EXPIRY, abs=0.01)
    task = stack.wait_task(task_id)

    assert task["result"]["status"] == "completed"
    (message,) = tool_messages(task)
    assert end_state(stack, session, message) == "denied"
    told = sent_tool_results(stack)[-1]
    assert f"no one approved it within {EXPIRY:g} seconds" in told
    assert "Do not retry" in told
    assert pending(stack) == []
    (entry,) = audit(stack, session)
    assert (entry["level"], entry["outcome"], entry["decided_by"]) == (
        "strict",
        "denied",
        "timeout",
    )
    stack.model.assert_valid()
