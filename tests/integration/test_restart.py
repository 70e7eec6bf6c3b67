"""A restart keeps the history and leaves nothing running or claiming to run.

These are calls run as the server's children (TETHER_KEEPER=0 on both servers): they
die with it (a graceful stop cancels them, a kill -9 takes the shell by its
parent-death signal), and the next start reaps what is left, by process group and by
marker. Under the keeper (the default) calls outlive the server instead:
test_keeper_restart.py."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from core_support import (
    Stack,
    chat_body,
    new_session,
    orphan_pid,
    orphaning_command,
    process_gone,
    shell_call,
    sse_events,
    stack_for_module,
    wait_for,
)
from helpers import host_pid
from webhook_support import fresh_receiver, subscribe

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("restart", TETHER_KEEPER="0", TETHER_CANCEL_GRACE_SECONDS="0.3")


@pytest.fixture(scope="module")
def plain_stack() -> Iterator[Stack]:
    """Unsandboxed: in the sandbox's pid namespace a tree dies with it, so only here does
    the marker alone stand between an orphan and a leak."""
    yield from stack_for_module(
        "restart-plain", TETHER_KEEPER="0", TETHER_CANCEL_GRACE_SECONDS="0.3", TETHER_SANDBOX="off"
    )


@pytest.fixture(autouse=True)
def _every_request_valid(stack: Stack) -> Iterator[None]:
    yield
    stack.model.assert_valid()


def _start_sleeper(stack: Stack) -> tuple[str, str, str, int]:
    """A chat with one finished turn, then a turn whose call sleeps: (session, first
    task, second task, the sleeper's pid)."""
    session = new_session()
    stack.model.script({"text": "first answer"})
    first = stack.submit("first question", session)
    stack.wait_task(first)
    workdir = stack.workspace / f"r-{uuid.uuid4().hex[:8]}"
    workdir.mkdir()
    command = f"cd {workdir.name} && sleep 300 & echo $! > {workdir.name}/s.pid; wait"
    _, second, call = stack.start_shell(command, session)
    pid_file: Path = workdir / "s.pid"
    ns_pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip()))
    # In the sandbox the call has its own pid namespace: find the host's number.
    pid = wait_for(lambda: host_pid(ns_pid, call["tool_call_id"]), what="the sleeper")
    assert psutil.pid_exists(pid)
    return session, first, second, pid


def _check_after_restart(stack: Stack, session: str, first: str, second: str) -> dict[str, object]:
    messages = stack.messages(session)
    texts = [m["message"].get("content") for m in messages]
    assert texts[:2] == ["first question", "first answer"]
    assert stack.task(first)["result"]["status"] == "completed"
    task = stack.task(second)
    assert task["status"] == "finished"
    assert task["result"]["status"] in ("cancelled", "failed")
    call_id = next(
        m for m in messages if m["kind"] == "assistant" and m["message"].get("tool_calls")
    )["message"]["tool_calls"][0]["x_tether_call_id"]
    info = stack.call(session, call_id)
    assert info["status"] == "completed" and info["end_state"] == "cancelled"
    assert stack.live_calls(session) == []
    assert not any(s["status"] == "running" for s in stack.api("GET", "/api/chats").json())
    return info


def test_graceful_restart(stack: Stack) -> None:
    session, first, second, pid = _start_sleeper(stack)
    stack.server.restart()
    assert process_gone(pid)
    info = _check_after_restart(stack, session, first, second)
    assert info["extra"].get("end_reason") == "server shutdown"


def test_a_chat_stream_open_at_a_graceful_stop_ends_saying_the_turn_is_stopped(
    stack: Stack,
) -> None:
    """Without the keeper a graceful stop stops the turn: a chat stream open then ends
    with a frame saying so, where it ended without a final frame."""
    session = new_session()
    stack.model.script(shell_call("sleep 300"), {"text": "done"})
    server, proc = stack.server, stack.server.proc
    assert proc is not None
    with server._client.stream(
        "POST",
        "/api/console/chat?events=tether",
        json=chat_body("sleep", session),
        headers={"Authorization": f"Bearer {server.token}"},
    ) as resp:
        events = sse_events(resp.iter_lines())
        task_id = next(events).data["task_id"]
        stack.wait_call(session)
        proc.send_signal(signal.SIGINT)
        ending = list(events)[-1].data
    proc.wait(15)
    server.start()
    assert ending == {
        "type": "server_exiting",
        "task_id": task_id,
        "turn": "stopped",
        "message": "The server is shutting down: this turn is stopped.",
    }
    assert stack.task(task_id)["status"] == "finished"


def test_crash_and_restart(stack: Stack) -> None:
    with fresh_receiver(stack) as receiver:
        subscribe(stack, receiver, "task.finished")
        session, first, second, pid = _start_sleeper(stack)
        stack.server.kill()
        stack.server.start()
        wait_for(lambda: process_gone(pid), timeout=5, what="the orphaned sleeper to be reaped")
        _check_after_restart(stack, session, first, second)
        assert stack.task(second)["result"]["status"] == "failed"
        # Its subscribers learn it failed (the restart that failed it told nobody).
        got = receiver.wait(lambda r: any(x.body["data"]["task_id"] == second for x in r))
    (told,) = [r for r in got if r.body["data"]["task_id"] == second]
    assert told.signature_ok and told.body["data"]["result"]["status"] == "failed"


def test_a_turn_after_restart_sees_a_valid_history(stack: Stack) -> None:
    session, _, _, _ = _start_sleeper(stack)
    stack.server.kill()
    stack.server.start()
    stack.model.script({"text": "after the crash"})
    task = stack.wait_task(stack.submit("still there?", session))
    assert task["result"]["status"] == "completed"
    stack.model.assert_valid()
    sent = stack.model.requests[-1]["messages"]
    assert sent[1]["content"] == "first question"
    assert any(m["role"] == "tool" for m in sent)


@pytest.mark.parametrize("how", ["shutdown", "crash"])
def test_an_orphaned_setsid_descendant_dies_with_a_restart(plain_stack: Stack, how: str) -> None:
    """The parent of a setsid'd process exits: only the call's marker still finds it,
    at shutdown, or at the next start after a crash."""
    stack = plain_stack
    workdir = stack.workspace / f"orphan-{uuid.uuid4().hex[:8]}"
    workdir.mkdir()
    session, _, call = stack.start_shell(orphaning_command(workdir.name))
    orphan = orphan_pid(workdir)
    if how == "shutdown":
        stack.server.stop()
        assert process_gone(orphan)
        stack.server.start()
    else:
        stack.server.kill()
        assert not process_gone(orphan)  # a crash leaves it behind
        stack.server.start()
        wait_for(lambda: process_gone(orphan), timeout=5, what="the orphan to be reaped")
    info = stack.call(session, call["tool_call_id"])
    assert (info["status"], info["end_state"]) == ("completed", "cancelled")
