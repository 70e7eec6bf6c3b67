"""With the keeper (TETHER_KEEPER=1), a tool call outlives its server: a kill -9 or a
graceful stop, then a start on the same home, and the call runs on under the same id,
its stream resumes with no gap and no duplicate, and the task completes."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import time
from collections.abc import Iterator

import psutil
import pytest
from core_support import (
    Stack,
    chat_body,
    keeper_stack,
    marked,
    new_session,
    shell_call,
    sse_events,
    start_server,
    tether_status,
    wait_for,
)
from keeper_restarts import (
    TICKER,
    check_resumed,
    check_task,
    ended_while_down,
    first_events,
    start_ticker,
    stream,
    through_a_restart,
)

from database_support import change_stored
from tether.keeper import layout

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from keeper_stack("keeper")


@pytest.fixture(autouse=True)
def _every_request_valid(stack: Stack) -> Iterator[None]:
    yield
    stack.model.assert_valid()


def test_a_call_survives_a_kill_9_of_its_server(stack: Stack) -> None:
    def crash() -> None:
        stack.server.kill()
        stack.server.start()

    through_a_restart(stack, crash)


def test_a_call_survives_a_graceful_stop_and_start(stack: Stack) -> None:
    through_a_restart(stack, stack.server.restart)


def test_a_call_survives_a_second_ctrl_c_while_the_server_waits_for_a_request(
    stack: Stack,
) -> None:
    """With a request still open (here an upload that stops halfway), uvicorn waits for
    it (inviting a second Ctrl-C); the second made it skip the application's shutdown,
    the turn was cancelled as if stopped, and the call was killed ("the task was
    stopped") instead of left running."""
    gate = f"gate-{time.monotonic_ns()}"
    session, task, call_id = start_ticker(stack, gate)
    before = first_events(stack, session, call_id, 5)
    server, proc = stack.server, stack.server.proc
    assert proc is not None
    waiting = "Waiting for connections to close"
    already = server.log_path.read_text(errors="replace").count(waiting)
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as upload:
        upload.sendall(
            b"POST /api/chats HTTP/1.1\r\n"
            + f"Host: 127.0.0.1:{server.port}\r\n".encode()
            + f"Authorization: Bearer {server.token}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 1000\r\n"
            + b"Expect: 100-continue\r\n\r\n"
        )
        # The server asks for the body once the application reads it: the request is
        # in progress, and the exit has to wait for it.
        assert b"100 Continue" in upload.recv(1024)
        upload.sendall(b"{")
        proc.send_signal(signal.SIGINT)
        wait_for(
            lambda: server.log_path.read_text(errors="replace").count(waiting) > already,
            what="the server to wait for the open stream",
        )
        proc.send_signal(signal.SIGINT)
        proc.wait(15)
    server.start()
    check_resumed(stack, session, call_id, before, gate)
    check_task(stack, task)


def test_an_open_stream_ends_at_a_graceful_stop_instead_of_holding_it(stack: Stack) -> None:
    """A stream open at Ctrl-C (a console) held the exit for uvicorn's 5 s grace, then was
    cut with an ERROR and a traceback in the log. It ends at once now; its client comes
    back with Last-Event-ID after the restart, and the call runs on."""
    gate = f"gate-{time.monotonic_ns()}"
    session, task, call_id = start_ticker(stack, gate)
    before = first_events(stack, session, call_id, 5)
    server, proc = stack.server, stack.server.proc
    assert proc is not None
    logged = len(server.log_path.read_text(errors="replace"))
    with stream(stack, session, call_id, 10**9) as resp:  # open, and quiet
        proc.send_signal(signal.SIGINT)
        assert list(resp.iter_lines()) == []  # ended by the server, cleanly
    proc.wait(15)
    log = server.log_path.read_text(errors="replace")[logged:]
    assert "timeout graceful shutdown exceeded" not in log
    assert "Waiting for connections to close" not in log or "ERROR" not in log
    assert "Traceback" not in log, log[-4000:]
    server.start()
    check_resumed(stack, session, call_id, before, gate)
    check_task(stack, task)


def test_chat_streams_open_at_a_graceful_stop_end_with_a_frame_saying_the_turn_goes_on(
    stack: Stack,
) -> None:
    """A chat stream open at Ctrl-C ended without its final frame: a client could not
    tell a server going away from a cut connection. Now its last frame says the server
    exits and the turn goes on after the restart (it does)."""
    gate = f"gate-{time.monotonic_ns()}"
    ticker = shell_call(TICKER.format(gate=gate), timeout=120)
    stack.model.script(ticker, ticker, {"text": "done"}, {"text": "done"})
    server, proc = stack.server, stack.server.proc
    assert proc is not None
    with contextlib.ExitStack() as streams:
        opened = {}
        for form in ("qwenpaw", "tether"):
            session = new_session()
            resp = streams.enter_context(
                server._client.stream(
                    "POST",
                    f"/api/console/chat?events={form}",
                    json=chat_body("tick", session),
                    headers={"Authorization": f"Bearer {server.token}"},
                )
            )
            assert resp.status_code == 200
            opened[form] = sse_events(resp.iter_lines())
            stack.wait_call(session)  # the turn is under way, its call running
        runtime_first, tether_first = next(opened["qwenpaw"]), next(opened["tether"])
        proc.send_signal(signal.SIGINT)
        runtime = [runtime_first, *opened["qwenpaw"]]
        tether = [tether_first, *opened["tether"]]
    proc.wait(15)
    runtime_task, tether_task = runtime_first.data["task_id"], tether_first.data["task_id"]
    # QwenPaw's form: the response, failed with code server_exiting, ends the frames.
    last = runtime[-1].data
    assert (last["object"], last["status"]) == ("response", "failed")
    assert last["error"]["code"] == "server_exiting"
    assert runtime_task in last["error"]["message"] and "goes on" in last["error"]["message"]
    numbers = [e.data["sequence_number"] for e in runtime]
    assert numbers == list(range(1, len(numbers) + 1))
    # Tether's form: its own last event.
    ending = tether[-1].data
    assert ending["type"] == "server_exiting" and ending["task_id"] == tether_task
    assert ending["turn"] == "continues" and tether_task in ending["message"]
    server.start()
    (stack.workspace / gate).touch()
    for task in (runtime_task, tether_task):
        check_task(stack, task)


def test_a_call_adopted_after_a_restart_can_be_moved_to_the_background(stack: Stack) -> None:
    """The resumed turn waited on an adopted call even once a person moved it to the
    background (answered 202), and its record said ``offload_reason: user`` for a
    result the turn then took directly. Now the turn goes on without it, as for a call
    the server started itself, and its result comes later."""
    gate = f"gate-{time.monotonic_ns()}"
    session, task, call_id = start_ticker(stack, gate)
    stack.server.restart()
    assert stack.call(session, call_id)["status"] == "running"
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/offload")
    assert resp.status_code == 202, resp.text
    resumed = stack.wait_task(task)
    assert resumed["result"]["status"] == "completed", resumed
    told = [m["content"] for m in resumed["messages"] if m["role"] == "tool"]
    assert told and "moved to the background" in told[-1]
    info = stack.call(session, call_id)
    assert (info["status"], info["offload_reason"]) == ("offloaded", "user")
    (stack.workspace / gate).touch()
    info = stack.wait_completed(session, call_id)
    assert (info["end_state"], info["offload_reason"]) == ("success", "user")

    def woken() -> dict[str, object] | None:
        last = stack.messages(session)[-1]
        return last if last["kind"] == "assistant" and last["task_id"] != task else None

    answer = wait_for(woken, what="the session woken by the background result")
    assert stack.wait_task(str(answer["task_id"]))["trigger"] == "background_result"


def test_a_call_ended_for_its_node_meanwhile_is_killed_not_adopted(stack: Stack) -> None:
    gate = f"gate-{time.monotonic_ns()}"
    session, task_id, call_id = start_ticker(stack, gate)
    wait_for(lambda: marked(call_id), what="the call's processes")
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
    assert marked(call_id), "the runner kept the call"
    stack.server.start()
    wait_for(lambda: not marked(call_id), 10, "the runner's call killed")
    assert stack.live_calls(session) == []
    info = stack.call(session, call_id)
    assert (info["end_state"], info["extra"]["end_reason"]) == ("error", "node lost")
    assert "is stopped, not adopted" in stack.server.logs_tail(50_000)


def test_a_running_call_with_a_corrupt_spec_is_lost_and_its_tree_stopped(stack: Stack) -> None:
    gate = f"gate-{time.monotonic_ns()}"
    session, task_id, call_id = start_ticker(stack, gate)
    wait_for(lambda: marked(call_id), what="the call's processes")
    stack.server.kill()
    spec = layout.call_dir(stack.server.home, call_id) / layout.SPEC_NAME
    spec.write_text('{"call_id": "' + call_id + '", "kill_at": "soon"')  # cut short
    stack.server.start()
    wait_for(lambda: not marked(call_id), 10, "the runner's call stopped")
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "error"
    assert str(spec) in info["extra"]["end_reason"]
    task = stack.wait_task(task_id, timeout=30)
    assert task["result"]["status"] == "failed"


def test_a_call_that_ended_while_the_server_was_down_is_delivered(stack: Stack) -> None:
    session, task, call_id = ended_while_down(stack, "hi")
    stack.server.start()
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "success"
    _check_task_text(stack, task, "hi\nbye\n")


def test_a_call_that_ended_before_its_deadline_is_not_timed_out_by_a_late_start(
    stack: Stack,
) -> None:
    """The deadline passed while the server was down, after the call had ended well
    within it: recorded 'timeout', killed at its deadline, with the note to the model."""
    session, task, call_id = ended_while_down(stack, "early", timeout=3)
    spec = json.loads((layout.call_dir(stack.server.home, call_id) / layout.SPEC_NAME).read_text())
    wait_for(lambda: time.time() > spec["kill_at"] + 0.2, what="the call's deadline to pass")
    (line,) = [x for x in tether_status(stack).splitlines() if x.startswith(call_id)]
    assert line.split("\t")[1] == "ended" and line.split("\t")[4] == "-"  # not "0s left"
    stack.server.start()
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "success", info
    _check_task_text(stack, task, "early\nbye\n")
    tool = [m for m in stack.model.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert "deadline" not in tool["content"]


def test_a_call_its_runner_killed_at_its_deadline_while_down_is_recorded_timed_out(
    stack: Stack,
) -> None:
    session = new_session()
    stack.model.script(shell_call("echo started; sleep 60", timeout=2), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    directory = layout.call_dir(stack.server.home, call_id)
    wait_for((directory / layout.SPEC_NAME).exists, what="the call to start under the runner")
    stack.server.kill()
    wait_for((directory / layout.STATUS_NAME).exists, timeout=20, what="the runner's kill")
    stack.server.start()
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "timeout", info
    assert stack.wait_task(task, timeout=30)["result"]["status"] == "completed"
    tool = [m for m in stack.model.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert "deadline" in tool["content"]


def _check_task_text(stack: Stack, task_id: str, output: str) -> None:
    task = stack.wait_task(task_id, timeout=30)
    assert task["result"]["status"] == "completed", task
    last = stack.model.requests[-1]["messages"]
    tool = [m for m in last if m["role"] == "tool"][-1]
    assert output in tool["content"]


def test_cancel_after_a_restart_kills_the_whole_tree(stack: Stack) -> None:
    session = new_session()
    command = "setsid sh -c 'sleep 300' & sleep 300 & wait"
    stack.model.script(shell_call(command, timeout=120), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    procs = _sleepers(call_id, 2)
    stack.server.kill()
    stack.server.start()
    assert stack.call(session, call_id)["status"] == "running"
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/cancel", json={})
    assert resp.status_code == 202, resp.text
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "cancelled"
    wait_for(lambda: all(_gone(p) for p in procs), what="the whole tree to die")
    assert stack.wait_task(task, timeout=30)["result"]["status"] == "completed"


def _sleepers(call_id: str, count: int) -> list[psutil.Process]:
    """The call's ``sleep 300`` processes, seen from the host: inside the sandbox's pid
    namespace ``$!`` names other numbers, so they are found by the call's marker."""

    def found() -> list[psutil.Process] | None:
        procs = []
        for proc in psutil.process_iter():
            try:
                marked = proc.environ().get("TETHER_TOOL_CALL", "").endswith(f":{call_id}")
                if marked and proc.cmdline() == ["sleep", "300"]:
                    procs.append(proc)
            except psutil.Error:
                continue
        return procs if len(procs) == count else None

    return list(wait_for(found, what=f"{count} sleeping processes of the call"))


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_second_server_on_the_same_home_refuses_to_start(stack: Stack) -> None:
    with pytest.raises(RuntimeError, match="already serves"):
        start_server(stack.server.home)


def test_tether_status_lists_a_call_in_flight(stack: Stack) -> None:
    gate = f"gate-{time.monotonic_ns()}"
    session, task, call_id = start_ticker(stack, gate)
    shown = tether_status(stack)
    (stack.workspace / gate).touch()
    runner = layout.runner_file(stack.server.home)
    assert shown.startswith("keeper: runner pid "), shown
    assert f"pid {json.loads(runner.read_bytes())['pid']} " in shown.splitlines()[0]
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
    stack.model.script(shell_call("sleep 300 & wait"), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    [sleeper] = _sleepers(call_id, 1)
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
    logged = len(stack.server.log_path.read_text(errors="replace"))
    stack.server.start()
    assert stack.call(session, call_id)["status"] == "offloaded"
    # Counted (it was left out when no turn waited on the call).
    started = stack.server.log_path.read_text(errors="replace")[logged:]
    assert "adopted 1 call(s) from the runner (1 in the background)" in started
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


def test_stopping_a_resumed_task_ends_every_call_it_was_waiting_on(stack: Stack) -> None:
    """The resumed turn waits on its adopted calls one by one; stopping it must not
    cancel the follower of the one it is waiting on (that call stayed `running` for
    ever while the runner had ended it)."""
    session = new_session()
    one = shell_call("exec sleep 300", timeout=120)["tool_calls"]
    stack.model.script({"tool_calls": one * 2})
    task = stack.submit("run two", session)
    calls = wait_for(lambda: len(c := stack.live_calls(session)) == 2 and c)
    ids = [c["tool_call_id"] for c in calls]
    specs = [layout.call_dir(stack.server.home, i) / layout.SPEC_NAME for i in ids]
    wait_for(lambda: all(s.exists() for s in specs), what="both calls under the runner")
    stack.server.kill()
    stack.server.start()
    assert sorted(c["tool_call_id"] for c in stack.live_calls(session)) == sorted(ids)
    resp = stack.api("POST", f"/api/console/chat/task/{task}/stop")
    assert resp.status_code == 200, resp.text
    wait_for(lambda: not stack.live_calls(session), timeout=30, what="both calls to end")
    for call_id in ids:
        info = stack.call(session, call_id)
        assert (info["status"], info["end_state"]) == ("completed", "cancelled"), info
    assert stack.wait_task(task, timeout=30)["result"]["status"] == "cancelled"
