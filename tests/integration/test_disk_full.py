"""TETHER_HOME on a disk that fills up while a call runs, then has room again: what
could not be written while it was full is written once it can be, and the server
answers throughout. The home is a small tmpfs of its own (mounting it needs root)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from core_support import (
    AppServer,
    FakeModel,
    Stack,
    chat_body,
    home_database,
    new_session,
    open_gate,
    shell_call,
    wait_for,
)
from helpers import register_mock_provider
from keeper_restarts import rest, stream
from security_support import output_text

from disk_support import fill, needs_root, small_disk
from tether.keeper import layout

pytestmark = [pytest.mark.integration, needs_root]


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "disk", "16m") as mount:
        yield mount


@pytest.fixture
def stack(disk: Path, tmp_path: Path) -> Iterator[Stack]:
    """A server (keeper on) whose home is on the small disk; its log is kept off it."""
    model = FakeModel()
    server = AppServer(
        disk / "home",
        {
            "TETHER_KEEPER": "1",
            "TETHER_LLM_MAX_RETRIES": "0",
            "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
            **home_database(disk / "home"),
        },
    )
    server.log_path = tmp_path / "server.log"
    try:
        server.start()
        register_mock_provider(server, model.url)
        yield Stack(server, model)
    finally:
        server.close()
        model.close()


def _fill_for_the_database(disk: Path, database: Path) -> Path:
    """:func:`fill`, with SQLite's write-ahead log emptied first: a log that has grown
    is written over from its start, so writes would still fit in it for a while."""
    fill(disk)
    with closing(sqlite3.connect(database)) as db:
        wait_for(
            lambda: db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0,
            what="the database's log to be emptied",
        )
    return fill(disk)


def test_a_task_that_ended_on_a_full_disk_finishes_once_there_is_room(
    stack: Stack, disk: Path
) -> None:
    """The task's result could not be stored, and it read ``running`` for good (until
    the next start), its call listed live, though the disk had room again."""
    session, task, call = stack.start_shell("while [ ! -e gate ]; do sleep 0.05; done")
    directory = layout.call_dir(stack.server.home, call["tool_call_id"])
    wait_for((directory / layout.SPEC_NAME).exists, what="the call to start under the runner")
    filler = _fill_for_the_database(disk, stack.server.home / "tether.db")
    open_gate(stack, "gate")  # an empty file: a full tmpfs still takes it
    # The runner records the end in the room it kept for it; the server cannot store it.
    ended = stack.wait_completed(session, call["tool_call_id"], timeout=30)
    assert ended["end_state"] == "success", ended
    # The turn goes on, and cannot store the call's result for the model either.
    wait_for(
        lambda: f"storing the result of task {task} failed" in stack.server.logs_tail(),
        what="the task's result to be refused",
    )
    assert stack.task(task)["status"] != "finished"
    assert stack.api("GET", "/api/healthz").status_code == 200

    filler.unlink()
    finished = stack.wait_task(task, timeout=30)
    assert finished["result"]["status"] == "failed", finished
    assert "database or disk is full" in finished["result"]["error"]["message"], finished
    assert stack.live_calls(session) == []
    stored = stack.call(session, call["tool_call_id"])
    assert stored["end_state"] == "success", stored


def test_a_write_on_a_full_disk_is_refused_with_507_and_kept_once_there_is_room(
    stack: Stack, disk: Path
) -> None:
    """The database's refusal was a fault of the server: 500 "Internal Server Error",
    and a traceback in the log for each request."""
    filler = _fill_for_the_database(disk, stack.server.home / "tether.db")
    session = new_session()
    refused = stack.api("POST", "/api/console/chat/task", json=chat_body("hi", session))
    assert refused.status_code == 507, refused.text
    assert "database or disk is full" in refused.json()["detail"]
    assert "Traceback" not in stack.server.logs_tail()
    # Nothing of it was kept: no session, no message.
    assert stack.api("GET", f"/api/chats/{session}/messages").status_code == 404

    filler.unlink()
    stack.model.script({"text": "hello"})
    assert stack.wait_task(stack.submit("hi", session))["result"]["status"] == "completed"


def test_an_approval_answered_on_a_full_disk_can_be_answered_again_once_there_is_room(
    stack: Stack, disk: Path
) -> None:
    """The answer was a 507 ("nothing of this write was kept"), but the call went on
    with it: the request was gone (404 on a second answer), the turn failed, and the
    call read ``awaiting_approval`` for good."""
    session = new_session()
    stack.model.script(shell_call("echo approved"), {"text": "done"})
    body = chat_body("run it", session, request_context={"approval_level": "strict"})
    task = stack.api("POST", "/api/console/chat/task", json=body).json()["task_id"]

    def pending() -> list[dict[str, Any]]:
        listed = stack.api("GET", f"/api/approval/list?session_id={session}")
        return list(listed.json()["pending_approvals"])

    request_id = wait_for(pending, what="the call to ask")[0]["request_id"]
    answer = {"request_id": request_id, "session_id": session}
    filler = _fill_for_the_database(disk, stack.server.home / "tether.db")
    refused = stack.api("POST", "/api/approval/approve", json=answer)
    assert refused.status_code == 507, refused.text
    assert [p["request_id"] for p in pending()] == [request_id]

    filler.unlink()
    approved = stack.api("POST", "/api/approval/approve", json=answer)
    assert approved.status_code == 200, approved.text
    assert stack.wait_task(task)["result"]["status"] == "completed"
    assert stack.live_calls(session) == []


@pytest.mark.parametrize("args", [["serve", "--port", "0"], ["db", "upgrade"], ["status"]])
def test_a_start_on_a_full_disk_says_so_in_one_line(
    stack: Stack, disk: Path, args: list[str]
) -> None:
    """SQLite cannot make its write-ahead log ("disk I/O error"): a 200-line traceback."""
    stack.server.stop()
    filler = fill(disk)
    done = subprocess.run(
        [sys.executable, "-m", "tether", *args],
        env=stack.server._env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    filler.unlink()
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "the database cannot be written (disk I/O error)" in lines[0], lines[0]
    assert "disk may be full" in lines[0]
    stack.server.start()


def test_a_first_start_on_a_full_disk_says_so_in_one_line(disk: Path) -> None:
    """The home's lock file was made but the server's pid could not be written in it:
    "remove what is in its place", as if something else stood there."""
    filler = fill(disk)
    home = disk / "home"
    done = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--port", "0"],
        env={**os.environ, "TETHER_HOME": str(home), **home_database(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    filler.unlink()
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{home / 'server.lock'} cannot be written, its disk is full" in lines[0], lines[0]
    assert "remove what is in its place" not in lines[0]


def test_a_stop_on_a_full_disk_completes(stack: Stack, disk: Path) -> None:
    """Giving up the node's lease failed, and the shutdown stopped there: "Application
    shutdown failed" and a traceback, the database left open."""
    filler = _fill_for_the_database(disk, stack.server.home / "tether.db")
    stack.server.stop()
    filler.unlink()
    assert stack.server.proc is not None and stack.server.proc.returncode == 0
    log = stack.server.logs_tail(1 << 20)
    assert "shutdown failed" not in log and "Traceback" not in log, log
    assert "the lease could not be given up: the database cannot be written" in log
    stack.server.start()


def test_a_task_stopped_on_a_full_disk_stops_and_the_server_exits(stack: Stack, disk: Path) -> None:
    """Its end waits for room, but the stop (and an exit) wait only for its turn."""
    _, task, call = stack.start_shell("while [ ! -e gate ]; do sleep 0.05; done")
    directory = layout.call_dir(stack.server.home, call["tool_call_id"])
    wait_for((directory / layout.SPEC_NAME).exists, what="the call to start under the runner")
    filler = _fill_for_the_database(disk, stack.server.home / "tether.db")
    stopped = stack.api("POST", f"/api/console/chat/task/{task}/stop", timeout=10)
    assert stopped.status_code == 200, stopped.text
    started = time.monotonic()
    stack.server.stop(timeout=30)
    assert time.monotonic() - started < 20
    assert "could not be stored before the exit" in stack.server.logs_tail()
    filler.unlink()
    stack.server.start()
    assert stack.wait_task(task)["status"] == "finished"


def test_a_stream_of_a_call_whose_end_waits_for_room_ends_with_one_done(
    stack: Stack, disk: Path
) -> None:
    """A call that ended while its end could not be stored: a resume with ``done``'s id
    was sent ``done`` again, numbered one higher each time (the id came from the resume,
    the call's last chunk being known only to the store), so a client that reconnects
    on every close did so for as long as the disk stayed full. Its last chunk is known
    from memory now: the resume is a 204."""
    session, _, call = stack.start_shell("echo a; while [ ! -e gate ]; do sleep 0.05; done; echo b")
    call_id = call["tool_call_id"]
    # The disk fills once "a" is in the call's output file (whose block then takes "b"
    # too): filled sooner, a loaded machine's sandbox had not printed it yet, and the
    # call's output was lost whole to the full disk (the stream held only done).
    wait_for(
        lambda: output_text(stack.server, session, call_id) == "a\n",
        what="the call's first line to reach the server",
    )
    filler = _fill_for_the_database(disk, stack.server.home / "tether.db")
    open_gate(stack, "gate")
    stack.wait_completed(session, call_id, timeout=30)
    assert stack.live_calls(session) == []
    try:
        events = rest(stack, session, call_id, 0)
        done = events[-1]
        assert done.data["type"] == "done" and done.id == events[-2].id + 1  # type: ignore[operator]
        assert "".join(e.data.get("text", "") for e in events) == "a\nb\n"
        assert done.id is not None
        for _ in range(2):
            with stream(stack, session, call_id, done.id) as resp:
                assert resp.status_code == 204
    finally:
        filler.unlink()
