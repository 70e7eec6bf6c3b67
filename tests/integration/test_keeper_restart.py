"""With the keeper (TETHER_KEEPER=1), a tool call outlives its server: a kill -9 or a
graceful stop, then a start on the same home, and the call runs on under the same id,
its stream resumes with no gap and no duplicate, and the task completes."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from core_support import (
    SseEvent,
    Stack,
    new_session,
    shell_call,
    sse_events,
    stack_for_module,
    start_server,
    wait_for,
)

from database_support import change_stored
from tether.keeper import client, layout
from tether.toolcalls.launcher import MARKER_VAR

pytestmark = pytest.mark.integration

# Prints a numbered line every 100 ms until the file "gate" appears, then "end".
TICKER = 'i=0; while [ ! -e {gate} ]; do i=$((i+1)); echo "line $i"; sleep 0.1; done; echo end'


def keeper_stack(prefix: str, **env: str) -> Iterator[Stack]:
    """A server with the keeper on; its runner is stopped afterwards (it outlives
    servers by design), with whatever it still runs."""
    body = stack_for_module(prefix, TETHER_KEEPER="1", TETHER_CANCEL_GRACE_SECONDS="0.3", **env)
    made = next(body)
    try:
        yield made
    finally:
        client.stop_runner(made.server.home)
        body.close()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from keeper_stack("keeper")


@pytest.fixture(autouse=True)
def _every_request_valid(stack: Stack) -> Iterator[None]:
    yield
    stack.model.assert_valid()


def _stream(stack: Stack, session: str, call_id: str, last: int | None = None) -> Any:
    headers = {"Authorization": f"Bearer {stack.server.token}"}
    if last is not None:
        headers["Last-Event-ID"] = str(last)
    return stack.server._client.stream(
        "GET", f"/api/tool-calls/{session}/{call_id}/stream", headers=headers
    )


def _first_events(stack: Stack, session: str, call_id: str, count: int) -> list[SseEvent]:
    got: list[SseEvent] = []
    with _stream(stack, session, call_id) as resp:
        for event in sse_events(resp.iter_lines()):
            got.append(event)
            if len(got) == count:
                break
    return got


def _rest(stack: Stack, session: str, call_id: str, last: int) -> list[SseEvent]:
    with _stream(stack, session, call_id, last) as resp:
        assert resp.status_code == 200
        return list(sse_events(resp.iter_lines()))


def _start_ticker(stack: Stack, gate: str) -> tuple[str, str, str]:
    session = new_session()
    stack.model.script(shell_call(TICKER.format(gate=gate), timeout=120), {"text": "done"})
    task = stack.submit("tick", session)
    call = stack.wait_call(session)
    return session, task, call["tool_call_id"]


def _check_resumed(
    stack: Stack, session: str, call_id: str, before: list[SseEvent], gate: str
) -> None:
    """After a restart: the same call is running; the stream resumed at the last event
    id continues it (the gate lets it finish) with no gap and no duplicate."""
    assert [c["tool_call_id"] for c in stack.live_calls(session)] == [call_id]
    assert stack.call(session, call_id)["status"] == "running"
    (stack.workspace / gate).touch()
    after = _rest(stack, session, call_id, before[-1].id or 0)
    events = before + after
    outputs = [e for e in events if e.data["type"] == "chunk"]
    assert [e.id for e in outputs] == list(range(1, len(outputs) + 1))
    text = "".join(e.data["text"] for e in outputs)
    numbers = [int(n) for n in re.findall(r"line (\d+)", text)]
    assert numbers == list(range(1, len(numbers) + 1))
    assert text.endswith("end\n")
    assert events[-1].data == {"type": "done", "end_state": "success", "status": "completed"}


def _check_task(stack: Stack, task_id: str) -> None:
    task = stack.wait_task(task_id, timeout=30)
    assert task["result"]["status"] == "completed", task
    assert task["result"]["text"] == "done"
    last = stack.model.requests[-1]["messages"]
    tool = [m for m in last if m["role"] == "tool"][-1]
    assert "line 1\n" in tool["content"] and "end" in tool["content"]


def _through_a_restart(stack: Stack, restart: Any) -> None:
    gate = f"gate-{time.monotonic_ns()}"
    session, task, call_id = _start_ticker(stack, gate)
    before = _first_events(stack, session, call_id, 5)
    restart()
    _check_resumed(stack, session, call_id, before, gate)
    _check_task(stack, task)


def test_a_call_survives_a_kill_9_of_its_server(stack: Stack) -> None:
    def crash() -> None:
        stack.server.kill()
        stack.server.start()

    _through_a_restart(stack, crash)


# On PostgreSQL too: the owner of a graceful stop gave its lock file and its lease up, so
# no live lease carries it and the next start takes its detached task up again.
def test_a_call_survives_a_graceful_stop_and_start(stack: Stack) -> None:
    _through_a_restart(stack, stack.server.restart)


def _marked(call_id: str) -> list[int]:
    """Pids of the processes carrying the marker of ``call_id``."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARKER_VAR, "").endswith(f":{call_id}"):
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def test_a_call_ended_for_its_node_meanwhile_is_killed_not_adopted(stack: Stack) -> None:
    gate = f"gate-{time.monotonic_ns()}"
    session, task_id, call_id = _start_ticker(stack, gate)
    wait_for(lambda: _marked(call_id), what="the call's processes")
    stack.server.kill()
    # A survivor declared the node dead meanwhile and ended its call and task.
    change_stored(
        stack.server.home,
        "UPDATE tool_calls SET status = 'completed', end_state = 'error', "
        f"end_reason = 'node lost' WHERE id = '{call_id}'",
    )
    change_stored(
        stack.server.home,
        "UPDATE tasks SET status = 'finished', "
        f"""result = '{{"status": "failed", "error": "node lost"}}' WHERE id = '{task_id}'""",
    )
    assert _marked(call_id), "the runner kept the call"
    stack.server.start()
    wait_for(lambda: not _marked(call_id), 10, "the runner's call killed")
    assert stack.live_calls(session) == []
    info = stack.call(session, call_id)
    assert (info["end_state"], info["extra"]["end_reason"]) == ("error", "node lost")
    assert "is stopped, not adopted" in stack.server.logs_tail(50_000)


def test_a_call_that_ended_while_the_server_was_down_is_delivered(stack: Stack) -> None:
    gate = f"gate-{time.monotonic_ns()}"
    session = new_session()
    command = f"echo hi; while [ ! -e {gate} ]; do sleep 0.05; done; echo bye"
    stack.model.script(shell_call(command), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    # Listed is not yet started: the runner has the call once it wrote its spec.
    spec = layout.call_dir(stack.server.home, call_id) / layout.SPEC_NAME
    wait_for(spec.exists, what="the call to start under the runner")
    stack.server.kill()
    (stack.workspace / gate).touch()
    status = layout.call_dir(stack.server.home, call_id) / layout.STATUS_NAME
    wait_for(status.exists, what="the call to end under the runner")
    stack.server.start()
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "success"
    _check_task_text(stack, task, "hi\nbye\n")


def _check_task_text(stack: Stack, task_id: str, output: str) -> None:
    task = stack.wait_task(task_id, timeout=30)
    assert task["result"]["status"] == "completed", task
    last = stack.model.requests[-1]["messages"]
    tool = [m for m in last if m["role"] == "tool"][-1]
    assert output in tool["content"]


def test_cancel_after_a_restart_kills_the_whole_tree(stack: Stack) -> None:
    session = new_session()
    pids = f"pids-{time.monotonic_ns()}"
    command = f"setsid sh -c 'sleep 300' & echo $! > {pids}; sleep 300 & echo $! >> {pids}; wait"
    stack.model.script(shell_call(command, timeout=120), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    pid_file: Path = stack.workspace / pids
    found = wait_for(lambda: len(pid_file.read_text().split()) == 2 if pid_file.exists() else None)
    assert found
    procs = [psutil.Process(int(p)) for p in pid_file.read_text().split()]
    stack.server.kill()
    stack.server.start()
    assert stack.call(session, call_id)["status"] == "running"
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/cancel", json={})
    assert resp.status_code == 202, resp.text
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "cancelled"
    wait_for(lambda: all(_gone(p) for p in procs), what="the whole tree to die")
    assert stack.wait_task(task, timeout=30)["result"]["status"] == "completed"


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_second_server_on_the_same_home_refuses_to_start(stack: Stack) -> None:
    with pytest.raises(RuntimeError, match="already serves"):
        start_server(stack.server.home)


def test_tether_status_lists_a_call_in_flight(stack: Stack) -> None:
    import subprocess
    import sys

    gate = f"gate-{time.monotonic_ns()}"
    session, task, call_id = _start_ticker(stack, gate)
    env = stack.server._env()
    shown = subprocess.run(
        [sys.executable, "-m", "tether", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    (stack.workspace / gate).touch()
    line = next(line for line in shown.splitlines() if line.startswith(call_id))
    assert f"\trunning\t{session}\t" in line
    assert "s left" in line
    stack.wait_task(task, timeout=30)


@pytest.fixture(scope="module")
def stopping_stack() -> Iterator[Stack]:
    yield from keeper_stack("keeper-stop", TETHER_ON_SHUTDOWN="stop")


def test_on_shutdown_stop_stops_calls_as_without_the_keeper(stopping_stack: Stack) -> None:
    stack = stopping_stack
    session = new_session()
    pid_name = f"pid-{time.monotonic_ns()}"
    stack.model.script(shell_call(f"sleep 300 & echo $! > {pid_name}; wait"), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    pid_file = stack.workspace / pid_name
    sleeper = psutil.Process(int(wait_for(lambda: pid_file.exists() and pid_file.read_text())))
    stack.server.restart()
    wait_for(lambda: _gone(sleeper), what="the call's tree to be stopped")
    info = stack.call(session, call_id)
    assert (info["status"], info["end_state"]) == ("completed", "cancelled")
    assert info["extra"]["end_reason"] == "server shutdown"
    assert stack.task(task)["result"]["status"] in ("cancelled", "failed")
    assert stack.live_calls(session) == []


def test_an_offloaded_call_delivers_its_result_after_a_restart(stack: Stack) -> None:
    gate = f"gate-{time.monotonic_ns()}"
    session = new_session()
    stack.model.script(
        shell_call(TICKER.format(gate=gate), timeout=120),
        {"text": "moved on"},
        {"text": "got the result"},
    )
    task = stack.submit("tick in the background", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/offload")
    assert resp.status_code == 202, resp.text
    assert stack.wait_task(task)["result"]["text"] == "moved on"
    stack.server.kill()
    stack.server.start()
    assert stack.call(session, call_id)["status"] == "offloaded"
    (stack.workspace / gate).touch()

    def delivered() -> str | None:
        for m in stack.messages(session):
            content = m["message"].get("content") or ""
            if m["kind"] == "notification" and call_id in content:
                return str(content)
        return None

    note = wait_for(delivered, timeout=30, what="the background result")
    assert "line 1\n" in note and "end" in note
    wait_for(
        lambda: stack.messages(session)[-1]["message"].get("content") == "got the result",
        timeout=30,
        what="the wake-up turn to answer",
    )
