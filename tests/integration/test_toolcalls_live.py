"""Tool calls while they run: live output, replay, cancel of whole process trees,
offload with a later result, timeouts and extended deadlines."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from core_support import (
    SseEvent,
    Stack,
    gated,
    new_session,
    open_gate,
    orphan_pid,
    orphaning_command,
    process_gone,
    scaled,
    shell_call,
    sse_events,
    stack_for_module,
    wait_for,
)
from helpers import host_pid

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("tc-live", TETHER_CANCEL_GRACE_SECONDS="0.5")


@pytest.fixture(scope="module")
def plain_stack() -> Iterator[Stack]:
    """Unsandboxed: in the sandbox's pid namespace a tree dies with it, so only here does
    the marker alone stand between an orphan and a leak."""
    yield from stack_for_module("tc-plain", TETHER_CANCEL_GRACE_SECONDS="0.5", TETHER_SANDBOX="off")


@pytest.fixture(autouse=True)
def _every_request_valid(stack: Stack) -> Iterator[None]:
    yield
    stack.model.assert_valid()


def _stream(stack: Stack, session: str, call_id: str, last_event_id: int | None = None):  # type: ignore[no-untyped-def]
    headers = {"Authorization": f"Bearer {stack.server.token}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    return stack.server._client.stream(
        "GET", f"/api/tool-calls/{session}/{call_id}/stream", headers=headers
    )


def _all_events(
    stack: Stack, session: str, call_id: str, last: int | None = None
) -> list[SseEvent]:
    with _stream(stack, session, call_id, last) as resp:
        assert resp.status_code == 200
        return list(sse_events(resp.iter_lines()))


def _output(events: list[SseEvent]) -> str:
    return "".join(e.data["text"] for e in events if e.data["type"] == "chunk")


# ------------------------------------------------------------------ live output


def test_output_is_live_on_the_stream_before_the_call_ends(stack: Stack) -> None:
    gate = f"g-{uuid.uuid4().hex[:8]}"
    session, task_id, call = stack.start_shell(gated(gate, "echo first", "echo second"))
    call_id = call["tool_call_id"]
    with _stream(stack, session, call_id) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp.iter_lines())
        first = next(events)
        assert first.data == {
            "type": "chunk",
            "data": {"type": "text", "text": "first\n"},
            "stream": "stdout",
            "text": "first\n",
        }
        assert first.id == 1
        # The line arrived while the call is still running.
        assert stack.call(session, call_id)["status"] == "running"
        open_gate(stack, gate)
        rest = list(events)
    assert _output(rest) == "second\n"
    assert rest[-1].data == {"type": "done", "end_state": "success", "status": "completed"}
    assert stack.wait_task(task_id)["result"]["status"] == "completed"
    info = stack.call(session, call_id)
    assert info["status"] == "completed" and info["end_state"] == "success"
    out = stack.api("GET", f"/api/tool-calls/{session}/{call_id}/output").json()
    assert out["is_closed"] is True and out["final_state"] == "success"
    assert out["content"] == [{"type": "text", "text": "first\nsecond\n"}]


def test_a_late_subscriber_gets_a_replay_and_last_event_id_resumes(stack: Stack) -> None:
    gate = f"g-{uuid.uuid4().hex[:8]}"
    session, task_id, call = stack.start_shell(gated(gate, "echo a; echo b >&2", "echo c"))
    call_id = call["tool_call_id"]
    path = f"/api/tool-calls/{session}/{call_id}/output"
    wait_for(
        lambda: "b" in json.dumps(stack.api("GET", path).json()["content"]), what="early output"
    )
    with _stream(stack, session, call_id) as resp:
        events = sse_events(resp.iter_lines())
        first = next(events)
        assert first.id == 1 and first.data["text"] in ("a\n", "a\nb\n")
        open_gate(stack, gate)
        replay = [first, *events]
    stack.wait_task(task_id)
    assert sorted(_output(replay)) == sorted("a\nb\nc\n")
    assert [e.id for e in replay] == list(range(1, len(replay) + 1))
    # A finished call replays the same, and Last-Event-ID resumes after that event.
    again = _all_events(stack, session, call_id)
    assert [(e.id, e.data) for e in again] == [(e.id, e.data) for e in replay]
    resumed = _all_events(stack, session, call_id, last=1)
    assert [(e.id, e.data) for e in resumed] == [(e.id, e.data) for e in replay[1:]]
    # An empty id (some client libraries send the header with the empty id a stream
    # starts with) is the start.
    empty = {"Last-Event-ID": ""}
    with stack.server._client.stream(
        "GET",
        f"/api/tool-calls/{session}/{call_id}/stream",
        headers={"Authorization": f"Bearer {stack.server.token}", **empty},
    ) as resp:
        assert resp.status_code == 200
        from_start = list(sse_events(resp.iter_lines()))
    assert [(e.id, e.data) for e in from_start] == [(e.id, e.data) for e in replay]
    # An id this stream never gave is refused, never a 500.
    for forged in ("9" * 5000, "\u00b2", "-1", "1.5", "0x10"):
        headers = {"Last-Event-ID": forged.encode("latin-1")}
        resp = stack.api("GET", f"/api/tool-calls/{session}/{call_id}/stream", headers=headers)
        assert resp.status_code == 422, (forged[:20], resp.status_code)
    # Past every chunk (and past the store's 32-bit column): nothing more, then done.
    for beyond in ("2147483648", "999999999999999999"):
        events = _all_events(stack, session, call_id, last=int(beyond))
        assert [e.data["type"] for e in events] == ["done"]


def test_a_stream_resumed_after_its_done_says_no_content_and_done_keeps_its_id(
    stack: Stack,
) -> None:
    """A browser's EventSource reconnects whenever the server closes the stream, with
    the last id it saw: ``done``'s own. That resume was sent ``done`` again, numbered one
    higher, so the browser reconnected for ever. Now it is a 204 (an EventSource stops
    on it), and ``done`` has one id however the stream was resumed."""
    gate = f"g-{uuid.uuid4().hex[:8]}"
    session, task_id, call = stack.start_shell(gated(gate, "echo a", "echo b; echo c >&2"))
    call_id = call["tool_call_id"]
    open_gate(stack, gate)
    stack.wait_task(task_id)
    whole = _all_events(stack, session, call_id)
    last_chunk = whole[-2].id
    assert last_chunk is not None
    done = whole[-1]
    assert done.data["type"] == "done" and done.id == last_chunk + 1
    for after in range(0, last_chunk + 1):
        resumed = _all_events(stack, session, call_id, last=after)
        assert [(e.id, e.data) for e in resumed] == [(e.id, e.data) for e in whole[after:]]
    for beyond in (done.id + 1, 10**9):
        events = _all_events(stack, session, call_id, last=beyond)
        assert [(e.id, e.data) for e in events] == [(done.id, done.data)]
    for _ in range(3):  # the same answer each time: nothing to drift
        with _stream(stack, session, call_id, done.id) as resp:
            assert resp.status_code == 204
            assert resp.read() == b""


# ------------------------------------------------------------------ cancel


def _tree_command(stack: Stack, ignore_term: bool) -> tuple[str, Path]:
    """A command whose shell starts a child shell, which starts a grandchild and a
    setsid'd descendant (a new session, outside the call's process group)."""
    workdir = stack.workspace / f"tree-{uuid.uuid4().hex[:8]}"
    workdir.mkdir()
    trap = "trap '' TERM\n" if ignore_term else ""
    (workdir / "tree.sh").write_text(
        f"{trap}echo $$ > child.pid\n"
        "sleep 300 &\n"
        "echo $! > grandchild.pid\n"
        "setsid sh -c 'echo $$ > setsid.pid; exec sleep 300' &\n"
        "wait\n"
    )
    return f"cd {workdir.name} && sh tree.sh", workdir


def _pids(directory: Path, call_id: str) -> dict[str, int]:
    names = ("child", "grandchild", "setsid")
    files = {n: directory / f"{n}.pid" for n in names}

    def ready() -> dict[str, int] | None:
        try:
            known = {n: host_pid(int(f.read_text()), call_id) for n, f in files.items()}
        except (FileNotFoundError, ValueError):
            return None
        pids = {n: p for n, p in known.items() if p is not None}
        if len(pids) != len(known):
            return None
        # The setsid'd shell writes its pid then execs sleep: wait for the exec.
        setsid_ok = psutil.Process(pids["setsid"]).name() == "sleep"
        return pids if setsid_ok else None

    return wait_for(ready, what="the process tree to start")


@pytest.mark.parametrize(
    ("force", "ignore_term"),
    [(False, False), (False, True), (True, True)],
    ids=["graceful", "graceful-escalates-to-kill", "force"],
)
def test_cancel_kills_child_grandchild_and_setsid_descendant(
    stack: Stack, force: bool, ignore_term: bool
) -> None:
    command, workdir = _tree_command(stack, ignore_term)
    session, task_id, call = stack.start_shell(command)
    call_id = call["tool_call_id"]
    pids = _pids(workdir, call_id)
    assert not any(process_gone(p) for p in pids.values())
    # The setsid'd process really left the call's session and process group.
    assert psutil.Process(pids["setsid"]).ppid() != 0
    assert os.getsid(pids["setsid"]) != os.getsid(pids["child"])
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/cancel", json={"force": force})
    assert resp.status_code == 202
    wait_for(lambda: all(process_gone(p) for p in pids.values()), timeout=5, what="the tree to die")
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "cancelled"
    assert info["force_cancelled"] is force
    task = stack.wait_task(task_id)
    assert task["result"]["status"] == "completed"
    tool_messages = [m for m in task["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1
    assert "The user cancelled this call" in tool_messages[0]["content"]
    # The model was told in the next request, and the turn went on.
    last = stack.model.requests[-1]["messages"]
    assert any(m["role"] == "tool" and "The user cancelled this call" in m["content"] for m in last)


def test_a_cancel_after_the_command_exited_leaves_it_a_success(plain_stack: Stack) -> None:
    """The command exited 0, leaving a child that holds its output open (the call is
    drained for a second, still running). A cancel then ends the child, but the command
    succeeded: the call and the model say so (a success reported as cancelled may be
    run again). Unsandboxed, so that the command's own pid is the host's."""
    stack = plain_stack
    workdir = stack.workspace / f"own-{uuid.uuid4().hex[:8]}"
    workdir.mkdir()
    session, task_id, call = stack.start_shell(
        f"sleep 300 & echo $$ $! > {workdir.name}/pids; echo wrote-42"
    )
    call_id = call["tool_call_id"]
    pids = workdir / "pids"
    command, child = wait_for(
        lambda: [int(p) for p in pids.read_text().split()] if pids.exists() else None
    )
    wait_for(lambda: process_gone(command), timeout=5, what="the command's exit")
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/cancel", json={})
    assert resp.status_code == 202, f"{resp.text} (the one-second drain ended the call first?)"
    info = stack.wait_completed(session, call_id)
    assert (info["end_state"], info["force_cancelled"]) == ("success", False)
    wait_for(lambda: process_gone(child), timeout=5, what="the child's end")
    task = stack.wait_task(task_id)
    tool = next(m for m in task["messages"] if m["role"] == "tool")
    assert "wrote-42" in tool["content"] and "exit code 0" in tool["content"]
    assert "cancelled" not in tool["content"]


# ------------------------------------------------------------------ offload


def test_offloaded_result_reaches_the_model_later_and_wakes_the_session(stack: Stack) -> None:
    gate = f"g-{uuid.uuid4().hex[:8]}"
    session = new_session()
    stack.model.script(
        shell_call(gated(gate, "echo working", "echo bg-result-42")),
        {"text": "carrying on without it"},
        {"text": "the background job said 42"},
    )
    task_id = stack.submit("start the job", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/offload")
    assert resp.status_code == 202
    task = stack.wait_task(task_id)
    # The turn finished while the tool still runs.
    assert task["result"] == {
        "status": "completed",
        "text": "carrying on without it",
        "steps": 2,
        "session_id": session,
    }
    info = stack.call(session, call_id)
    assert info["status"] == "offloaded" and info["offload_reason"] == "user"
    assert "moved to the background" in next(
        m["content"] for m in task["messages"] if m["role"] == "tool"
    )
    requests_before = len(stack.model.requests)
    open_gate(stack, gate)
    assert stack.wait_completed(session, call_id)["end_state"] == "success"

    def woken() -> list[dict[str, object]] | None:
        messages = stack.messages(session)
        kinds = [m["kind"] for m in messages]
        return messages if kinds[-2:] == ["notification", "assistant"] else None

    messages = wait_for(woken, what="the session to wake")
    note, answer = messages[-2], messages[-1]
    assert "bg-result-42" in note["message"]["content"]
    assert call_id in note["message"]["content"]
    assert answer["message"]["content"] == "the background job said 42"
    wake_task = stack.wait_task(str(answer["task_id"]))
    assert wake_task["trigger"] == "background_result"
    assert wake_task["result"]["status"] == "completed"
    later = stack.model.requests[requests_before:]
    assert len(later) == 1
    assert "bg-result-42" in later[0]["messages"][-1]["content"]


# ------------------------------------------------------------------ deadlines


def test_timeout_kills_the_tree(stack: Stack) -> None:
    workdir = f"to-{uuid.uuid4().hex[:8]}"
    (stack.workspace / workdir).mkdir()
    command = f"cd {workdir} && sh -c 'sleep 30 & echo $! > sleeper.pid; wait'"
    session, task_id, call = stack.start_shell(command, timeout=1)
    pid_file = stack.workspace / workdir / "sleeper.pid"
    sleeper = wait_for(
        lambda: (
            host_pid(int(pid_file.read_text()), call["tool_call_id"])
            if pid_file.exists() and pid_file.read_text().strip()
            else None
        )
    )
    info = stack.wait_completed(session, call["tool_call_id"], timeout=30)
    assert info["end_state"] == "timeout"
    assert info["elapsed"] < 25  # killed, not ended by its 30 s sleep
    assert process_gone(int(sleeper))
    task = stack.wait_task(task_id)
    assert task["result"]["status"] == "completed"
    tool = next(m for m in task["messages"] if m["role"] == "tool")
    assert "ran past its deadline" in tool["content"]


@pytest.mark.parametrize("how", ["cancel", "timeout"])
def test_an_orphaned_setsid_descendant_dies_with_its_call(plain_stack: Stack, how: str) -> None:
    """The parent of a setsid'd process exits: only the call's marker still finds it."""
    stack = plain_stack
    workdir = stack.workspace / f"orphan-{uuid.uuid4().hex[:8]}"
    workdir.mkdir()
    # The deadline leaves the test time to see the orphan alive first.
    extra = {"timeout": scaled(5)} if how == "timeout" else {}
    session, task_id, call = stack.start_shell(orphaning_command(workdir.name), **extra)
    call_id = call["tool_call_id"]
    orphan = orphan_pid(workdir)
    if how == "cancel":
        resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/cancel", json={})
        assert resp.status_code == 202
    info = stack.wait_completed(session, call_id, timeout=scaled(5) + 15)
    assert info["end_state"] == {"cancel": "cancelled", "timeout": "timeout"}[how]
    wait_for(lambda: process_gone(orphan), timeout=5, what="the orphan to die")
    # The turn goes on to its scripted answer: let it take it before the next test
    # scripts the model.
    assert stack.wait_task(task_id)["result"]["status"] == "completed"


def test_extend_deadline_keeps_a_call_alive_past_its_timeout(stack: Stack) -> None:
    gate = f"g-{uuid.uuid4().hex[:8]}"
    # Wide enough for the extend to reach the keeper's runner, which enforces the kill
    # deadline on its own, before the deadline passes on a loaded machine. (This test
    # found that an extend made while the runner was still starting the tree never
    # reached it: tests/unit/toolcalls/test_toolcalls_extend_while_starting.py.)
    timeout = scaled(6)
    command = gated(gate, "echo up", "echo survived")
    session, task_id, call = stack.start_shell(command, timeout=timeout)
    call_id = call["tool_call_id"]
    resp = stack.api(
        "POST", f"/api/tool-calls/{session}/{call_id}/extend-deadline", json={"seconds": 600}
    )
    assert resp.status_code == 202
    # Past the original deadline, the call still runs.
    wait_for(
        lambda: stack.call(session, call_id)["elapsed"] > timeout + 0.5,
        timeout + 10,
        "the old deadline",
    )
    assert stack.call(session, call_id)["status"] == "running"
    open_gate(stack, gate)
    info = stack.wait_completed(session, call_id)
    assert info["end_state"] == "success"
    out = stack.api("GET", f"/api/tool-calls/{session}/{call_id}/output").json()
    assert out["content"][0]["text"] == "up\nsurvived\n"
    assert stack.wait_task(task_id)["result"]["status"] == "completed"


def test_a_nul_in_output_is_stored_and_delivered_as_a_replacement(stack: Stack) -> None:
    """PostgreSQL cannot store NUL in text: the call's output (and with it the turn)
    was lost there. Output is stored and sent with U+FFFD in its place, on every store."""
    session_id = new_session()
    (stack.workspace / "nul.bin").write_bytes(b"in\0file\n")
    stack.model.script(
        shell_call("printf 'before\\0after\\n'"),
        {"tool_calls": [("read_file", json.dumps({"path": "nul.bin"}))]},
        {"text": "done"},
    )
    task = stack.wait_task(stack.submit("print a NUL", session_id))
    assert task["result"]["status"] == "completed", task
    tools = [m["content"] for m in task["messages"] if m["role"] == "tool"]
    assert any("before\ufffdafter" in t for t in tools), tools
    assert any("in\ufffdfile" in t for t in tools), tools
