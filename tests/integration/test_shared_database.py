"""Two servers on one database: each recovers only what a dead server left behind.

A server's start-up ends calls and tasks left unfinished, but only those of servers that
are gone: a second server started on a database the first is using must not record the
first one's calls as interrupted, nor signal their processes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_support import (
    FakeModel,
    Stack,
    chat_body,
    gated,
    new_session,
    process_gone,
    shell_call,
    sse_events,
    start_server,
    wait_for,
)
from helpers import register_mock_provider

from database_support import on_postgresql, postgres_url, require_postgresql

pytestmark = pytest.mark.integration

GATE = "shared-gate"


@pytest.fixture
def first(tmp_path: Path) -> Iterator[tuple[Stack, str]]:
    """A server on a database in ``tmp_path``, with the fake model: (stack, its URL).
    Its calls run under the keeper (the default); its runner is stopped afterwards."""
    yield from _first_server(tmp_path, TETHER_CANCEL_GRACE_SECONDS="0.3")


@pytest.fixture
def childish(tmp_path: Path) -> Iterator[tuple[Stack, str]]:
    """Like ``first``, with its calls as its children (TETHER_KEEPER=0): they die with
    it, and what they leave is for the next server to reap."""
    yield from _first_server(tmp_path, TETHER_KEEPER="0")


@pytest.fixture
def first_on_test_database(tmp_path: Path) -> Iterator[tuple[Stack, str]]:
    """Like ``first``, on PostgreSQL in the PostgreSQL pass (``first`` is on SQLite in
    both: its tests look at the owners' lock files beside the SQLite file)."""
    if not on_postgresql():
        yield from _first_server(tmp_path)
        return
    require_postgresql()
    url = postgres_url(f"shared:{tmp_path}")
    yield from _first_server(tmp_path, url)


def _first_server(tmp_path: Path, url: str = "", **env: str) -> Iterator[tuple[Stack, str]]:
    url = url or f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    model = FakeModel()
    server = None
    try:
        server = _start(tmp_path / "a", url, **env)
        register_mock_provider(server, model.url)
        yield Stack(server, model), url
    finally:
        if server is not None:
            server.close()
        model.close()


def _start(home: Path, url: str, **env: str) -> Any:
    # Unsandboxed: the tests watch pids a call reports (its own, not the host's, in the
    # sandbox's pid namespace) and the reaping a shared database must leave alone.
    return start_server(
        home,
        TETHER_SANDBOX="off",
        TETHER_DATABASE_URL=url,
        TETHER_DEFAULT_APPROVAL_LEVEL="off",
        TETHER_LLM_MAX_RETRIES="0",
        **env,
    )


def _running_call(stack: Stack, watched: str = "$$") -> tuple[str, str, str, int]:
    """A call holding on a gate: (session, task, call id, the pid of ``watched``, by
    default the call's shell)."""
    pid_file = f"p-{uuid.uuid4().hex[:8]}.pid"
    command = f"echo {watched} > {pid_file}; " + gated(GATE, "echo started", "echo finished")
    session, task_id, call = stack.start_shell(command, new_session())
    path = stack.workspace / pid_file
    pid = int(wait_for(lambda: path.exists() and path.read_text().strip(), what="the pid"))
    return session, task_id, call["tool_call_id"], pid


def _let_finish(stack: Stack, session: str, task_id: str, call_id: str) -> None:
    """Open the gate: the call ends in success and its task completes."""
    (stack.workspace / GATE).touch()
    task = stack.wait_task(task_id)
    assert task["result"]["status"] == "completed", task
    info = stack.call(session, call_id)
    assert (info["status"], info["end_state"]) == ("completed", "success")


def test_a_second_server_leaves_the_first_ones_running_call_alone(
    first: tuple[Stack, str], tmp_path: Path
) -> None:
    stack, url = first
    session, task_id, call_id, pid = _running_call(stack)
    second = _start(tmp_path / "b", url)
    try:
        # The second start recovered nothing of the first's: its call still runs there,
        # its process was not signalled, and the second sees the call as running too.
        assert not process_gone(pid)
        assert stack.call(session, call_id)["status"] == "running"
        seen = second.api_request("GET", f"/api/tool-calls/{session}/{call_id}").json()
        assert seen["status"] == "running"
        assert stack.task(task_id)["status"] == "running"
        _let_finish(stack, session, task_id, call_id)
        output = stack.api("GET", f"/api/tool-calls/{session}/{call_id}/output").json()
        assert "finished" in "".join(part["text"] for part in output["content"])
    finally:
        second.close()


def test_a_server_recovers_the_calls_of_a_crashed_one(
    childish: tuple[Stack, str], tmp_path: Path
) -> None:
    """Without the keeper on either server (TETHER_KEEPER=0): the crashed one's call
    dies with it, and the second ends its task "server restarted" (under the keeper a
    start resumes such a task instead: test_keeper_restart.py)."""
    stack, url = childish
    # The shell dies with the server (parent-death signal); a background child of it
    # outlives the crash, as real leftovers do.
    session, task_id, call_id, pid = _running_call(stack, "$(sleep 300 >/dev/null 2>&1 & echo $!)")
    stack.server.kill()
    assert not process_gone(pid)
    second = _start(tmp_path / "b", url, TETHER_KEEPER="0")
    try:
        wait_for(lambda: process_gone(pid), timeout=5, what="the crashed server's call reaped")
        info = second.api_request("GET", f"/api/tool-calls/{session}/{call_id}").json()
        assert (info["status"], info["end_state"]) == ("completed", "cancelled")
        task = second.api_request("GET", f"/api/console/chat/task/{task_id}").json()
        assert task["result"] == {
            "status": "failed",
            "error": {"message": "server restarted"},
            "session_id": session,
        }
        # The dead server's lock file is gone; only the live server's remains.
        owners = list((tmp_path / "shared.db.owners").iterdir())
        assert len(owners) == 1
    finally:
        second.close()


def test_a_call_adopted_after_a_crash_belongs_to_the_server_that_adopted_it(
    first: tuple[Stack, str], tmp_path: Path
) -> None:
    stack, url = first
    session, task_id, call_id, pid = _running_call(stack)
    # Killed and started again on its home: the keeper's call is adopted and its task
    # resumed by the new server, which owns both from now on.
    stack.server.kill()
    stack.server.start()
    assert stack.call(session, call_id)["status"] == "running"
    # So a server with another home does not take them for a dead server's leftovers:
    # the call is neither recorded as interrupted nor signalled, the task not failed.
    second = _start(tmp_path / "b", url)
    try:
        assert not process_gone(pid)
        seen = second.api_request("GET", f"/api/tool-calls/{session}/{call_id}").json()
        assert seen["status"] == "running"
        assert stack.task(task_id)["status"] != "finished"
        _let_finish(stack, session, task_id, call_id)
    finally:
        second.close()


def test_a_call_of_another_server_without_redis_is_followed_until_it_ends(
    first_on_test_database: tuple[Stack, str], tmp_path: Path
) -> None:
    """Two servers on one database and no Redis (TETHER_REDIS_URL unset): the second
    answered /stream of the first's call with ``done`` at once, the call still running,
    /output called it closed, and a cancel was told the call had completed. It follows
    the stored output until the call ends now, and refuses to act on it, naming the
    setting that would let it."""
    stack, url = first_on_test_database
    session, task_id, call_id, _ = _running_call(stack)
    second = _start(tmp_path / "b", url)
    try:
        base = f"/api/tool-calls/{session}/{call_id}"
        output = second.api_request("GET", f"{base}/output").json()
        assert (output["is_closed"], output["final_state"]) == (False, None)
        cancel = second.api_request("POST", f"{base}/cancel", json={})
        assert cancel.status_code == 502, cancel.text
        assert "TETHER_REDIS_URL" in cancel.json()["detail"]
        assert stack.call(session, call_id)["status"] == "running"
        headers = {"Authorization": f"Bearer {second.token}"}
        with second._client.stream("GET", f"{base}/stream", headers=headers) as resp:
            events = sse_events(resp.iter_lines())
            first_chunk = next(events)
            assert "started" in first_chunk.data["text"], first_chunk
            # Only now may the call end: a done before this point is a lie.
            _let_finish(stack, session, task_id, call_id)
            rest = list(events)
        assert "finished" in "".join(e.data.get("text", "") for e in rest)
        assert rest[-1].data == {"type": "done", "end_state": "success", "status": "completed"}
    finally:
        second.close()


def test_a_task_of_another_server_without_redis_is_not_stopped_from_this_one(
    first_on_test_database: tuple[Stack, str], tmp_path: Path
) -> None:
    """Without Redis the second server answered a stop of the first's task, or of its
    session's turns, with ``stopped: false``, as if the task had ended, while it ran on.
    It refuses now, naming the setting that would let it, and stops nothing."""
    stack, url = first_on_test_database
    session, task_id, call_id, _ = _running_call(stack)
    second = _start(tmp_path / "b", url)
    try:
        stops = [
            (f"/api/console/chat/task/{task_id}/stop", {}),
            ("/api/console/chat/stop", {"chat_id": session}),
        ]
        for path, params in stops:
            resp = second.api_request("POST", path, params=params)
            assert resp.status_code == 502, resp.text
            assert "TETHER_REDIS_URL" in resp.json()["detail"]
            assert f"task {task_id}" in resp.json()["detail"]
        assert stack.task(task_id)["status"] == "running"
        _let_finish(stack, session, task_id, call_id)
        # An ended task is no other node's: stopping it is the plain "already finished".
        resp = second.api_request("POST", f"/api/console/chat/task/{task_id}/stop")
        assert (resp.status_code, resp.json()["stopped"]) == (200, False)
    finally:
        second.close()


def test_an_approval_of_another_servers_call_without_redis_is_refused_there(
    first_on_test_database: tuple[Stack, str], tmp_path: Path
) -> None:
    """Without Redis the second server called a request the first's call waits on
    unknown (404). It refuses now, naming the setting, and decides nothing: the first
    still takes the answer."""
    stack, url = first_on_test_database
    session = new_session()
    stack.model.script(shell_call("echo approved"), {"text": "done"})
    strict = {"request_context": {"approval_level": "strict"}}
    body = chat_body("go", session, **strict)
    task_id = stack.api("POST", "/api/console/chat/task", json=body).json()["task_id"]
    second = _start(tmp_path / "b", url)
    try:
        approval = wait_for(lambda: _pending(stack, session), what="the approval")[0]
        decision = {"request_id": approval["request_id"], "session_id": session}
        refused = second.api_request("POST", "/api/approval/approve", json=decision)
        assert refused.status_code == 502, refused.text
        assert "TETHER_REDIS_URL" in refused.json()["detail"]
        assert _pending(stack, session) == [approval]
        resp = stack.api("POST", "/api/approval/approve", json=decision)
        assert resp.status_code == 200, resp.text
        assert stack.wait_task(task_id)["result"]["status"] == "completed"
        # Decided: nothing waits on it any more, unknown as on one node.
        again = second.api_request("POST", "/api/approval/deny", json=decision)
        assert again.status_code == 404, again.text
    finally:
        second.close()


def _pending(stack: Stack, session: str) -> list[dict[str, Any]]:
    resp = stack.api("GET", "/api/approval/list", params={"session_id": session})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["pending_approvals"])


def test_a_single_server_stops_the_task_an_earlier_run_of_it_left(
    first: tuple[Stack, str],
) -> None:
    """One server, no Redis: the task its crashed run left (another owner id) is resumed
    at the next start as this run's own, and stopping it is no other node's business."""
    stack, _ = first
    session, task_id, call_id, pid = _running_call(stack)
    stack.server.kill()
    stack.server.start()
    assert stack.task(task_id)["status"] != "finished"
    resp = stack.api("POST", "/api/console/chat/stop", params={"chat_id": session})
    assert (resp.status_code, resp.json()["stopped"]) == (200, True), resp.text
    assert stack.wait_task(task_id)["result"]["status"] == "cancelled"
    wait_for(lambda: process_gone(pid), timeout=10, what="the stopped call's shell gone")
    assert stack.wait_completed(session, call_id)["end_state"] == "cancelled"
