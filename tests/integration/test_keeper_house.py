"""The keeper's parts that hold with TETHER_KEEPER off too (TETHER_KEEPER=0 here; the
keeper is on by default): one server per home, and `tether status` as a command of the
CLI, which says that calls run as the server's children."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from core_support import (
    AppServer,
    Stack,
    gated,
    new_session,
    open_gate,
    run_tether_status,
    stack_for_module,
    tether_status,
)
from governance_support import decide, first_pending

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("house", TETHER_KEEPER="0")


def test_a_second_server_on_the_same_home_is_refused(stack: Stack) -> None:
    second = AppServer(stack.server.home)
    try:
        with pytest.raises(RuntimeError, match="server exited early") as refused:
            second.start()
    finally:
        second.close()
    assert "already serves" in str(refused.value)
    assert stack.api("GET", "/api/healthz").status_code == 200


def test_tether_status_lists_the_call_in_flight_then_none(stack: Stack) -> None:
    session, task_id, call = stack.start_shell(gated("status-gate", "echo started"))
    listed = tether_status(stack)
    (line,) = [line for line in listed.splitlines() if line.startswith(call["tool_call_id"])]
    assert line.split("\t")[1:3] == ["running", session]
    assert line.split("\t")[4].endswith("s left")  # the row's deadline (it showed "-")
    assert f"runs under the server (pid {stack.server.proc.pid})" in listed
    open_gate(stack, "status-gate")
    stack.wait_task(task_id)
    assert tether_status(stack) == (
        "keeper: off (TETHER_KEEPER=0): calls run as the server's children\n"
        "no tool calls in flight\n"
    )


def test_tether_status_on_a_home_where_nothing_ran_says_so_and_creates_nothing(
    stack: Stack, tmp_path: Path
) -> None:
    """A mistyped TETHER_HOME got a new home and database, and "no tool calls in flight"."""
    missing = tmp_path / "typo" / "home"
    env = {**stack.server._env(), "TETHER_HOME": str(missing)}
    env.pop("TETHER_DATABASE_URL", None)
    for home in (missing, tmp_path):  # no directory; a directory with no database
        env["TETHER_HOME"] = str(home)
        done = run_tether_status(env)
        assert done.returncode == 1, done
        assert "nothing ran there" in done.stderr and str(home) in done.stderr
    assert not missing.parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_tether_status_shows_a_call_awaiting_approval_as_such(stack: Stack) -> None:
    # It was listed "running" under the server (and, once the server was gone,
    # "not_kept": "its process and output are lost"), though it had not started.
    session = new_session()
    created = stack.api("POST", "/api/chats", json={"session_id": session, "user_id": "it"})
    assert created.status_code == 200, created.text
    settings = stack.api("PUT", f"/api/chats/{session}/settings", json={"approval_level": "strict"})
    assert settings.status_code == 200, settings.text
    session, task_id, call = stack.start_shell("echo asked", session)
    approval = first_pending(stack, session)
    listed = tether_status(stack)
    (line,) = [line for line in listed.splitlines() if line.startswith(call["tool_call_id"])]
    assert line.split("\t")[1:3] == ["awaiting_approval", session]
    assert line.split("\t")[4] == "-"
    assert "runs under the server" not in listed
    assert decide(stack, "deny", approval)[0] == 200
    stack.wait_task(task_id)
