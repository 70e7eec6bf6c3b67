"""A restart keeps the history and leaves nothing running or claiming to run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from core_support import Stack, new_session, stack_for_module, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("restart", TETHER_CANCEL_GRACE_SECONDS="0.3")


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
    _, second, _ = stack.start_shell(command, session)
    pid_file: Path = workdir / "s.pid"
    pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip()))
    assert psutil.pid_exists(pid)
    return session, first, second, pid


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


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
    assert _gone(pid)
    info = _check_after_restart(stack, session, first, second)
    assert info["extra"].get("end_reason") == "server shutdown"


def test_crash_and_restart(stack: Stack) -> None:
    session, first, second, pid = _start_sleeper(stack)
    stack.server.kill()
    stack.server.start()
    wait_for(lambda: _gone(pid), timeout=5, what="the orphaned sleeper to be reaped")
    _check_after_restart(stack, session, first, second)
    assert stack.task(second)["result"]["status"] == "failed"


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
