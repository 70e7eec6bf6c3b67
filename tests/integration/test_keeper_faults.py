"""The keeper's files and links under attack: output files that lie or are not files,
a server that stops reading its runner's events, a lock file removed, a runner record
that is a FIFO. Each fault ends what it touches with an error that says why, and no
more: the server keeps serving, stops when told, and lets no second server in."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from core_support import (
    Stack,
    keeper_stack,
    marked,
    new_session,
    shell_call,
    tether_status,
    wait_for,
)
from keeper_restarts import ended_while_down

from tether.keeper import layout, records
from tether.keeper.status import read_end, write_end

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from keeper_stack("keeperfaults")


@pytest.fixture(autouse=True)
def _serving(stack: Stack) -> Iterator[None]:
    """Each test starts and ends with the server up (some stop it on purpose)."""
    yield
    if stack.server.proc is None or stack.server.proc.poll() is not None:
        stack.server.start()


def _lost_naming(stack: Stack, session: str, task: str, call_id: str, named: str) -> None:
    info = stack.wait_completed(session, call_id, timeout=40)
    assert info["end_state"] == "error", info
    assert named in info["extra"].get("end_reason", ""), info
    assert stack.wait_task(task, timeout=30)["result"]["status"] == "failed"


def test_a_record_claiming_bytes_past_the_end_loses_the_call(stack: Stack) -> None:
    """The record read as not yet written, for ever: the server spun at 99% CPU and the
    call stayed running."""
    session, task, call_id = ended_while_down(stack)
    output = layout.call_dir(stack.server.home, call_id) / layout.OUTPUT_NAME
    data = output.read_bytes()
    # The last record's length field says 64 bytes more than it holds; the same size.
    got, _ = records.parse(data, 0)
    last = got[-2].end if len(got) > 1 else 0
    longer = f"{int(data[last + 1 : last + 9], 16) + 64:08x}".encode()
    output.write_bytes(data[: last + 1] + longer + data[last + 9 :])
    stack.server.start()
    _lost_naming(stack, session, task, call_id, str(output))


@pytest.mark.parametrize("kind", ["fifo", "directory", "link"])
def test_an_output_that_is_not_a_file_loses_the_call_and_the_server_still_stops(
    stack: Stack, kind: str
) -> None:
    """A FIFO blocked a worker thread for ever: the call stayed running and the server
    ignored SIGINT."""
    session, task, call_id = ended_while_down(stack)
    output = layout.call_dir(stack.server.home, call_id) / layout.OUTPUT_NAME
    output.unlink()
    if kind == "fifo":
        os.mkfifo(output)
    elif kind == "directory":
        output.mkdir()
    else:
        output.symlink_to(stack.server.home / "token")
    stack.server.start()
    _lost_naming(stack, session, task, call_id, str(output))
    stack.server.proc.send_signal(signal.SIGINT)
    assert stack.server.proc.wait(timeout=20) is not None


def test_a_second_server_is_refused_even_with_the_lock_file_removed(stack: Stack) -> None:
    """The lock was the file at the path: deleted, a second server took a new one and
    adopted the first one's running call."""
    gate = f"gate-{time.monotonic_ns()}"
    session = new_session()
    stack.model.script(shell_call(f"while [ ! -e {gate} ]; do sleep 0.05; done"), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    layout.server_lock(stack.server.home).unlink()
    second = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--port", "0"],
        env=stack.server._env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 1 and "already serves" in second.stderr
    (stack.workspace / gate).touch()
    assert stack.wait_task(task, timeout=30)["result"]["status"] == "completed"
    info = stack.call(session, call_id)
    assert info["end_state"] == "success", info["extra"]


def test_two_servers_started_at_once_one_serves_and_the_other_says_why(
    stack: Stack, tmp_path: Path
) -> None:
    """The loser failed on the schema the winner was making (a traceback), not with the
    reason."""
    stack.server.stop()
    logs = [tmp_path / f"start-{i}.log" for i in range(2)]
    starts = []
    for log in logs:
        with log.open("w") as err:
            starts.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tether", "serve", "--port", "0"],
                    env=stack.server._env(),
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    start_new_session=True,
                )
            )
    try:
        loser = wait_for(
            lambda: next((p for p in starts if p.poll() is not None), None), 60, "a loser"
        )
        assert loser.returncode == 1
        assert "already serves" in logs[starts.index(loser)].read_text()
    finally:
        for proc in starts:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def test_a_runner_record_that_is_a_fifo_neither_hangs_status_nor_the_start(
    stack: Stack,
) -> None:
    stack.server.stop()
    record = layout.runner_file(stack.server.home)
    if record.exists():
        record.unlink()
    os.mkfifo(record)
    try:
        assert tether_status(stack).startswith("keeper: ")
        stack.server.start()
        stack.model.script(shell_call("echo fine"), {"text": "done"})
        task = stack.submit("run", new_session())
        assert stack.wait_task(task, timeout=30)["result"]["status"] == "completed"
    finally:
        if record.is_fifo():
            record.unlink()


def test_garbage_in_a_running_calls_output_loses_it_and_stops_its_tree(stack: Stack) -> None:
    """The call was recorded ended while its processes ran on, unwatched."""
    session = new_session()
    stack.model.script(shell_call("echo started; exec sleep 300", timeout=600), {"text": "done"})
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    wait_for(lambda: marked(call_id), what="the call's processes")
    output = layout.call_dir(stack.server.home, call_id) / layout.OUTPUT_NAME
    wait_for(lambda: output.stat().st_size > 0, what="the call's first output")
    with output.open("ab") as appended:
        appended.write(b"GARBAGE-NOT-A-RECORD\n")
    # Nothing wakes the follower of a quiet call but its next look (up to 20 s).
    info = stack.wait_completed(session, call_id, timeout=40)
    assert info["end_state"] == "error", info
    assert str(output) in info["extra"].get("end_reason", ""), info
    wait_for(lambda: not marked(call_id), 20, "the lost call's tree to be stopped")
    # In a turn that runs on (no restart), the model is told what was lost.
    assert stack.wait_task(task, timeout=30)["result"]["status"] == "completed"
    tool = [m for m in stack.model.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert "is corrupt" in tool["content"]


def test_a_call_in_the_background_lost_at_adoption_tells_its_session(stack: Stack) -> None:
    """It ended `error`, and its session never heard of it."""
    gate = f"gate-{time.monotonic_ns()}"
    session = new_session()
    command = f"echo hi; while [ ! -e {gate} ]; do sleep 0.05; done; echo bye"
    stack.model.script(
        shell_call(command, timeout=120), {"text": "moved on"}, {"text": "heard of it"}
    )
    task = stack.submit("in the background", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call_id}/offload")
    assert resp.status_code == 202, resp.text
    assert stack.wait_task(task)["result"]["text"] == "moved on"
    directory = layout.call_dir(stack.server.home, call_id)
    stack.server.kill()
    (stack.workspace / gate).touch()
    wait_for((directory / layout.STATUS_NAME).exists, what="the call to end under the runner")
    (directory / layout.STATUS_NAME).write_text("{garbage")
    stack.server.start()
    assert stack.wait_completed(session, call_id)["end_state"] == "error"

    def told() -> str | None:
        for message in stack.messages(session):
            content = message["message"].get("content") or ""
            if message["kind"] == "notification" and call_id in content:
                return str(content)
        return None

    assert layout.STATUS_NAME in wait_for(told, timeout=30, what="the session to be told")
    # The turn the news woke has had its answer: the next test's script is its own.
    wait_for(
        lambda: any(
            "heard of it" in str(m["message"].get("content")) for m in stack.messages(session)
        ),
        timeout=30,
        what="the woken turn's answer",
    )


def test_a_call_directory_with_no_row_is_reported_and_kept(stack: Stack) -> None:
    """It was neither logged nor shown by `tether status` (until past its retention)."""
    gate = f"gate-{time.monotonic_ns()}"
    stack.model.script(shell_call(f"while [ ! -e {gate} ]; do sleep 0.05; done"), {"text": "ok"})
    session = new_session()
    task = stack.submit("run", session)
    call_id = stack.wait_call(session)["tool_call_id"]
    (stack.workspace / gate).touch()
    stack.wait_task(task)
    calls = layout.calls_dir(stack.server.home)
    copied = calls / f"call_stray{time.monotonic_ns()}"
    shutil.copytree(calls / call_id, copied)
    bare = calls / f"call_bare{time.monotonic_ns()}"
    bare.mkdir()
    stack.server.restart()
    log = stack.server.logs_tail(20_000)
    assert "with no database row, neither adopted nor removed" in log
    assert str(copied) in log and str(bare) in log
    listed = tether_status(stack)
    for stray in (copied, bare):
        (line,) = [line for line in listed.splitlines() if line.startswith(stray.name)]
        assert line.split("\t")[1] == "no_row"
        assert stray.is_dir()


def test_past_the_retention_a_calls_files_go_and_a_strays_stay(stack: Stack) -> None:
    """The start lists the call directories once: the retention removes what has a row,
    and keeps what the same start reported as having none."""
    session = new_session()
    stack.model.script(shell_call("echo gone"), {"text": "done"})
    # Not waited for in flight: so short a call may have ended before a look finds it.
    done = stack.wait_task(stack.submit("run it", session))
    assert done["result"]["status"] == "completed"
    call_id = [m for m in done["messages"] if m["role"] == "tool"][-1]["x_tether_call_id"]
    calls = layout.calls_dir(stack.server.home)
    end = read_end(calls / call_id)
    assert end is not None
    write_end(calls / call_id, dataclasses.replace(end, ended_at=end.ended_at - 8 * 86400))
    stray = calls / f"call_stray{time.monotonic_ns()}"
    shutil.copytree(calls / call_id, stray)
    stack.server.restart()
    assert not (calls / call_id).exists()
    assert stray.is_dir()
    assert str(stray) in stack.server.logs_tail(20_000)
    assert stack.call(session, call_id)["end_state"] == "success"
