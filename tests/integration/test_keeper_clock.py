"""A call's deadline across a restart when the wall clock has moved: the runner counts
on the monotonic clock, so the next start takes the time left from the runner, not from
the epoch ``kill_at`` written at the call's start.

The test cannot step the machine's clock: it moves the call's ``kill_at`` instead,
which is what a step forward of the wall clock looks like to the next start."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest
from core_support import Stack, keeper_stack, open_gate, wait_for

from tether.keeper import layout
from tether.keeper.status import read_spec, write_spec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from keeper_stack("keeperclock")


def test_a_wall_clock_step_does_not_shorten_an_adopted_calls_deadline(stack: Stack) -> None:
    """The next start read the deadline from ``kill_at``: a step forward of the wall
    clock while the server was down killed the call that much early (as a timeout)."""
    session, task, call = stack.start_shell(
        "while [ ! -e gate ]; do sleep 0.05; done; echo done", timeout=600
    )
    directory = layout.call_dir(stack.server.home, call["tool_call_id"])
    wait_for((directory / layout.SPEC_NAME).exists, what="the call to start under the runner")
    stack.server.kill()
    spec = read_spec(directory)
    assert spec is not None and spec.kill_at is not None
    # The wall clock stepped 10 minutes forward: kill_at is now 2 s away.
    write_spec(directory, dataclasses.replace(spec, kill_at=time.time() + 2))
    stack.server.start()

    adopted = stack.wait_call(session)
    assert adopted["kill_remaining"] is not None
    assert adopted["kill_remaining"] > 500, adopted
    open_gate(stack, "gate")
    assert stack.wait_completed(session, call["tool_call_id"])["end_state"] == "success"
    assert stack.wait_task(task)["result"]["status"] == "completed"
