"""The runner with real processes: it starts calls, records their output and end, and
enforces deadlines and tree kills with no server connected."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from keeper_support import (
    LIMITS,
    MARKER_PREFIX,
    SH,
    cgroups_here,
    output_of,
    run_to_end,
    runner_of,
    start_fields,
    wait_for,
)

from tether.keeper import client, layout, protocol
from tether.keeper.client import KeeperClient
from tether.keeper.identity import ProcessIdentity, identify
from tether.keeper.status import read_end, read_spec


async def test_a_call_runs_and_its_output_and_end_are_on_disk(
    runner_home: Path, keeper: KeeperClient
) -> None:
    out = layout.call_dir(runner_home, "c1") / layout.OUTPUT_NAME
    # Each line waits until the previous one is on disk, so the order is the command's.
    step = 'echo {0}{1}; until grep -q {0} "{2}"; do sleep 0.01; done'
    command = "; ".join(
        [
            step.format("first", "", out),
            step.format("second", " >&2", out),
            step.format("third", "", out),
            "exit 3",
        ]
    )
    await run_to_end(keeper, "c1", command)
    got = output_of(runner_home, "c1")
    assert [(r.stream, r.text) for r in got] == [
        ("stdout", "first\n"),
        ("stderr", "second\n"),
        ("stdout", "third\n"),
    ]
    end = read_end(layout.call_dir(runner_home, "c1"))
    assert end is not None
    assert (end.exit_code, end.signal, end.stopped_by) == (3, None, None)
    assert end.output_end == got[-1].end
    spec = read_spec(layout.call_dir(runner_home, "c1"))
    assert spec is not None and spec.argv == [SH, "-c", command]


async def test_the_runner_kills_at_the_deadline_with_no_client(
    runner_home: Path, keeper: KeeperClient
) -> None:
    answer = await keeper.request(
        "start", **start_fields("late", "echo up; exec sleep 300", kill_at=time.time() + 1.0)
    )
    root = ProcessIdentity(answer["pid"], answer["create_time"])
    # Nobody is connected now: the runner alone must end the call at its deadline.
    wait_for(lambda: not root.is_alive(), what="the call to be killed")
    end = wait_for(lambda: read_end(layout.call_dir(runner_home, "late")), what="its end")
    assert end.stopped_by == "deadline"
    assert end.signal == signal.SIGTERM
    assert time.time() - end.ended_at < 10


async def test_extend_moves_the_deadline_the_runner_enforces(
    runner_home: Path, keeper: KeeperClient
) -> None:
    await keeper.request("start", **start_fields("ext", "exec sleep 300", kill_at=time.time() + 1))
    new_kill_at = time.time() + 120
    await keeper.request("extend", call_id="ext", kill_at=new_kill_at)
    spec = read_spec(layout.call_dir(runner_home, "ext"))
    assert spec is not None and spec.kill_at == new_kill_at
    listed = (await keeper.request("list"))["calls"]
    assert [(c["call_id"], c["kill_at"]) for c in listed] == [("ext", new_kill_at)]
    # Past the old deadline, it still runs: wait for a later event than the old deadline.
    watch = await keeper.watch()
    await keeper.request("extend", call_id="ext", kill_at=time.time() + 1.5)
    async for event in watch:
        if event["event"] == "ended":
            break
    watch.close()
    end = read_end(layout.call_dir(runner_home, "ext"))
    assert end is not None and end.stopped_by == "deadline"
    assert end.ended_at > spec.started_at + 1.4


async def test_signal_kills_the_whole_tree_even_an_orphaned_setsid_grandchild(
    runner_home: Path, keeper: KeeperClient
) -> None:
    # The inner shell starts a grandchild in a new session, prints its pid and exits:
    # the grandchild is orphaned, outside the call's process group.
    command = "sh -c 'setsid sleep 300 >/dev/null 2>&1 & echo $!'; exec sleep 300"
    watch = await keeper.watch()
    await keeper.request("start", **start_fields("tree", command))
    async for event in watch:
        if event["event"] == "output":
            break
    grandchild = identify(int(output_of(runner_home, "tree")[0].text))
    assert os.getpgid(grandchild.pid) != runner_of(runner_home).pid
    await keeper.request("signal", call_id="tree", force=False)
    async for event in watch:
        if event["event"] == "ended":
            break
    watch.close()
    wait_for(lambda: not grandchild.is_alive(), what="the grandchild to die")
    end = read_end(layout.call_dir(runner_home, "tree"))
    assert end is not None and end.stopped_by == "request"


async def test_a_new_client_finds_a_call_started_by_one_that_went_away(
    runner_home: Path,
) -> None:
    gate = runner_home / "gate"
    first = KeeperClient(runner_home)
    started = await first.request(
        "start", **start_fields("kept", f'echo before; until [ -e "{gate}" ]; do sleep 0.02; done')
    )
    first.close()  # the server that asked is gone; the runner keeps the call
    second = KeeperClient(runner_home)
    listed = (await second.request("list"))["calls"]
    assert [(c["call_id"], c["pid"], c["create_time"]) for c in listed] == [
        ("kept", started["pid"], started["create_time"])
    ]
    watch = await second.watch()
    gate.touch()
    async for event in watch:
        if event["event"] == "ended":
            break
    watch.close()
    second.close()
    assert [r.text for r in output_of(runner_home, "kept")] == ["before\n"]
    end = read_end(layout.call_dir(runner_home, "kept"))
    assert end is not None and end.exit_code == 0


async def test_output_past_the_limit_is_dropped_with_one_note(
    runner_home: Path, keeper: KeeperClient
) -> None:
    await run_to_end(keeper, "big", "head -c 10000 /dev/zero | tr '\\0' x", output_limit=4096)
    got = output_of(runner_home, "big")
    stdout = "".join(r.text for r in got if r.stream == "stdout")
    assert stdout == "x" * 4096
    assert "output limit of 4096 bytes" in got[-1].text
    end = read_end(layout.call_dir(runner_home, "big"))
    assert end is not None and end.dropped_bytes == 10000 - 4096


async def test_a_call_with_limits_runs_in_a_group_and_its_figures_are_on_disk(
    runner_home: Path, keeper: KeeperClient
) -> None:
    if not cgroups_here():
        pytest.skip("no writable cgroup hierarchy here")
    assert (await keeper.hello()).protocol >= 2
    command = "grep -c call- /proc/self/cgroup; exec python3 -c \"b = b'x' * (32 << 20)\""
    await run_to_end(keeper, "lim", command, limits=LIMITS)
    stdout = "".join(r.text for r in output_of(runner_home, "lim") if r.stream == "stdout")
    assert int(stdout) >= 2  # memory and pids at least
    end = read_end(layout.call_dir(runner_home, "lim"))
    assert end is not None and end.exit_code == 0
    used = end.measured()
    assert used is not None and used.killed_by is None
    assert (used.peak_memory_bytes or 0) >= 32 << 20 and used.limits is not None
    assert used.limits.memory_mb == 256


async def test_the_runner_ends_a_call_on_its_process_limit_and_says_why(
    runner_home: Path, keeper: KeeperClient
) -> None:
    if not cgroups_here():
        pytest.skip("no writable cgroup hierarchy here")
    await run_to_end(
        keeper, "bomb", "perl -e 'fork while 1'", limits=LIMITS, kill_at=time.time() + 60
    )
    end = read_end(layout.call_dir(runner_home, "bomb"))
    assert end is not None
    used = end.measured()
    assert used is not None and used.killed_by == "processes"
    assert (used.processes_peak or 0) >= 16


async def test_a_deadline_with_limits_is_recorded_as_killed_by_deadline(
    runner_home: Path, keeper: KeeperClient
) -> None:
    await run_to_end(keeper, "slow", "exec sleep 300", limits=LIMITS, kill_at=time.time() + 0.5)
    end = read_end(layout.call_dir(runner_home, "slow"))
    assert end is not None and end.stopped_by == "deadline"
    used = end.measured()
    assert used is not None and used.killed_by == "deadline"


async def test_a_graceful_stop_spares_a_supervising_root(
    runner_home: Path, keeper: KeeperClient
) -> None:
    # Like bwrap, the root ends once its command does; it must not get the SIGTERM itself
    # (for bwrap that would SIGKILL the command before its handlers run).
    inner = 'trap "echo child-term; exit 0" TERM; sleep 300 & wait'
    command = f"trap 'echo root-term' TERM; sh -c '{inner}'; echo root-done"
    watch = await keeper.watch()
    try:
        await keeper.request(
            "start", **start_fields("sup", command, supervised=True, limits=LIMITS)
        )
        wait_for(lambda: len(process_tree_of(runner_home, "sup")) >= 3, what="the tree")
        await keeper.request("signal", call_id="sup")
        async for event in watch:
            if event["event"] == "ended" and event["call_id"] == "sup":
                break
    finally:
        watch.close()
    text = "".join(r.text for r in output_of(runner_home, "sup"))
    assert "child-term" in text and "root-done" in text
    assert "root-term" not in text


def process_tree_of(home: Path, call_id: str) -> list[int]:
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TETHER_TOOL_CALL") == f"{MARKER_PREFIX}:{call_id}":
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


async def test_bad_requests_get_reasons_and_change_nothing(
    runner_home: Path, keeper: KeeperClient
) -> None:
    with pytest.raises(protocol.ProtocolError, match="missing field 'argv'"):
        await keeper.request("start", call_id="x", cwd="/", env={}, marker="m")
    with pytest.raises(protocol.ProtocolError, match="unusable call id"):
        await keeper.request("start", **start_fields("../x", "true"))
    with pytest.raises(protocol.ProtocolError, match="no running call"):
        await keeper.request("signal", call_id="nobody")
    with pytest.raises(protocol.ProtocolError, match="unknown operation"):
        await keeper.request("format_disk")
    with pytest.raises(protocol.ProtocolError, match="No such file"):
        await keeper.request("start", **start_fields("nocwd", "true", cwd="/no/such/dir"))
    with pytest.raises(protocol.ProtocolError, match="syscall_filter is not base64"):
        await keeper.request("start", **start_fields("filtered", "true"), syscall_filter="%%")
    with pytest.raises(protocol.ProtocolError, match="not a seccomp program"):
        await keeper.request("start", **start_fields("filtered", "true"), syscall_filter="YWJj")
    # Past a pipe's capacity its write for bwrap blocked the runner for good.
    huge = base64.b64encode(bytes(70000)).decode()
    with pytest.raises(protocol.ProtocolError, match="syscall_filter is too long"):
        await keeper.request("start", **start_fields("filtered", "true"), syscall_filter=huge)
    assert (await keeper.request("list"))["calls"] == []
    await run_to_end(keeper, "filtered", "true")  # never started: the id is still free
    await run_to_end(keeper, "once", "true")
    with pytest.raises(protocol.ProtocolError, match="already started once"):
        await keeper.request("start", **start_fields("once", "true"))


async def test_a_newer_protocol_is_refused_with_the_runner_version(
    runner_home: Path, keeper: KeeperClient
) -> None:
    info = await keeper.hello()
    assert (info.protocol, info.oldest, info.calls) == (protocol.PROTOCOL, protocol.OLDEST, 0)
    assert info.identity == runner_of(runner_home)
    # hello is answered at any version: a newer server learns what this runner speaks.
    newer = await _raw_request(keeper, {"v": protocol.PROTOCOL + 1, "op": "hello"})
    assert (newer["ok"], newer["protocol"]) == (True, protocol.PROTOCOL)
    answer = await _raw_request(keeper, {"v": protocol.PROTOCOL + 1, "op": "list"})
    assert answer == {
        "ok": False,
        "error": f"protocol {protocol.PROTOCOL + 1} is newer than this runner's "
        f"({protocol.PROTOCOL})",
    }


async def _raw_request(keeper: KeeperClient, message: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    reader, writer = await asyncio.open_unix_connection(keeper.socket)
    writer.write(protocol.encode(message))
    line = await reader.readline()
    writer.close()
    return protocol.decode(line)


def test_one_runner_per_home(runner_home: Path) -> None:
    first = runner_of(runner_home)
    assert client.ensure_runner(runner_home) == first
    # Started by hand beside the live one, a second runner refuses and exits.
    import subprocess
    import sys

    second = subprocess.run(
        [sys.executable, "-m", "tether.keeper", "--home", str(runner_home)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert second.returncode == 3
    assert b"a runner already serves" in second.stderr
    assert first.is_alive()


def test_a_reused_pid_is_not_taken_for_the_runner(runner_home: Path) -> None:
    real = runner_of(runner_home)
    path = layout.runner_file(runner_home)
    saved = path.read_bytes()
    # Same pid, another start time: a different process that got the number.
    layout.write_atomically(path, {"pid": real.pid, "create_time": real.create_time - 100})
    try:
        assert client.recorded_runner(runner_home) is None
    finally:
        path.write_bytes(saved)


async def test_sigterm_stops_the_runner_and_every_call_it_runs(
    runner_home: Path, keeper: KeeperClient
) -> None:
    answers = [
        await keeper.request("start", **start_fields(f"s{i}", "exec sleep 300")) for i in range(3)
    ]
    runner = runner_of(runner_home)
    os.kill(runner.pid, signal.SIGTERM)
    wait_for(lambda: not runner.is_alive(), what="the runner to exit")
    for i, answer in enumerate(answers):
        assert not ProcessIdentity(answer["pid"], answer["create_time"]).is_alive()
        end = read_end(layout.call_dir(runner_home, f"s{i}"))
        assert end is not None and end.stopped_by == "request"


async def test_a_runner_that_does_not_answer_is_reported_not_waited_on_for_ever(
    runner_home: Path, keeper: KeeperClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped (SIGSTOP) runner still accepts connections: the answer that never
    comes must end in a clear error, or the server's start would hang on it."""
    monkeypatch.setattr(client, "ANSWER_TIMEOUT", 0.3)
    await keeper.hello()
    runner = runner_of(runner_home)
    os.kill(runner.pid, signal.SIGSTOP)
    try:
        with pytest.raises(client.RunnerUnavailable, match=r"did not answer within 0\.3 s"):
            await keeper.hello()
        with pytest.raises(client.RunnerUnavailable, match="did not answer"):
            await keeper.watch()
    finally:
        os.kill(runner.pid, signal.SIGCONT)
    assert (await keeper.hello()).identity == runner


def test_a_live_runner_is_found_by_its_socket_when_its_record_is_damaged(
    runner_home: Path,
) -> None:
    runner = runner_of(runner_home)
    layout.runner_file(runner_home).write_text("{damaged")
    assert client.ensure_runner(runner_home) == runner
    layout.runner_file(runner_home).unlink()
    assert client.ensure_runner(runner_home) == runner


async def test_a_runner_whose_socket_was_removed_listens_again_when_found(
    runner_home: Path,
) -> None:
    # A cleaner of the temporary directory (where deep homes keep the socket) removed it.
    old = runner_of(runner_home)
    layout.socket_path(runner_home).unlink()
    assert await asyncio.to_thread(client.ensure_runner, runner_home) == old
    fresh = KeeperClient(runner_home)
    try:
        assert (await fresh.hello()).identity == old
    finally:
        fresh.close()
    assert "listening there again" in layout.runner_log(runner_home).read_text()


def test_a_sandboxed_process_that_reaches_the_socket_is_refused(runner_home: Path) -> None:
    """A call's sandbox may show the socket (another home, or a temporary directory it
    does not hide); the runner must not take requests from it, or a call could start
    commands outside its sandbox."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed")
    sock = layout.socket_path(runner_home)
    ask = (
        "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
        's.sendall(b\'{"v": 1, "op": "hello"}\\n\'); print(s.makefile().readline())'
    )
    # Refused at once, before it asks anything: it reads why.
    listen = (
        "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
        "print(s.makefile().readline())"
    )
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid"]
    done = subprocess.run(
        [*argv, "--", sys.executable, "-c", listen, str(sock)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["ok"] is False and "another pid namespace" in answer["error"]
    # Outside the sandbox the same request is answered.
    outside = subprocess.run(
        [sys.executable, "-c", ask, str(sock)], capture_output=True, text=True, timeout=30
    )
    assert json.loads(outside.stdout)["ok"] is True
