"""Out of the box (no TETHER_KEEPER set) tool calls run under the keeper: what a new
user sees when they stop `tether serve` with a call running, start it again, and stop it
with nothing running."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from core_support import Stack, stack_for_module, tether_status
from keeper_restarts import check_resumed, check_task, first_events, start_ticker

from tether import __version__
from tether.keeper import client, layout

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("keeper-default", TETHER_CANCEL_GRACE_SECONDS="0.3")


def _logged_since(stack: Stack, offset: int) -> str:
    return stack.server.log_path.read_text(errors="replace")[offset:]


def test_a_stop_leaves_the_running_call_says_so_and_the_next_start_adopts_it(
    stack: Stack,
) -> None:
    home = stack.server.home
    runner = client.recorded_runner(home)
    assert runner is not None, "no runner: the keeper is not on by default"
    assert f"keeper on: tool calls run under runner pid {runner.pid}" in _logged_since(stack, 0)
    gate = f"gate-{time.monotonic_ns()}"
    session, task, call_id = start_ticker(stack, gate)
    before = first_events(stack, session, call_id, 3)

    mark = stack.server.log_path.stat().st_size
    stack.server.stop()
    assert (
        f"leaving 1 call(s) running under the keeper (runner pid {runner.pid}); they are "
        "adopted at the next start" in _logged_since(stack, mark)
    )
    assert runner.is_alive()
    # With no server up, `tether status` shows the runner and the call it still runs.
    shown = tether_status(stack).splitlines()
    assert shown[0] == (
        f"keeper: runner pid {runner.pid} (Tether {__version__}), 1 call(s); exits after "
        "60s with no call and no server"
    )
    (line,) = [line for line in shown if line.startswith(call_id)]
    assert line.split("\t")[1:3] == ["running", session]
    # A runner whose socket a cleaner removed is asked to listen again, not missed.
    layout.socket_path(home).unlink()
    assert tether_status(stack).splitlines()[0] == shown[0]

    stack.server.start()
    assert client.recorded_runner(home) == runner
    check_resumed(stack, session, call_id, before, gate)
    check_task(stack, task)
    stack.model.assert_valid()


def test_a_stop_with_nothing_running_leaves_no_process(stack: Stack) -> None:
    runner = client.recorded_runner(stack.server.home)
    assert runner is not None
    mark = stack.server.log_path.stat().st_size
    stack.server.stop()
    said = _logged_since(stack, mark)
    assert f"keeper: no call running; runner pid {runner.pid} exits with the server" in said
    assert not runner.is_alive()
    assert tether_status(stack) == (
        "keeper: no runner now (a server with the keeper on starts one for its next call)\n"
        "no tool calls in flight\n"
    )
    stack.server.start()  # for the fixture's own stop
