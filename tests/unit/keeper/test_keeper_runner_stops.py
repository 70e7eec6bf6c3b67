"""Stopping calls with a real runner: many at once, while others start, after an error,
and on SIGTERM, the runner's descriptors stay its own and it always ends and exits."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import psutil
import pytest
from keeper_support import (
    LIMITS,
    cgroups_here,
    marked_processes,
    output_of,
    runner_of,
    start_fields,
    wait_for,
)

from tether.keeper import client, layout
from tether.keeper.client import KeeperClient, Watch
from tether.keeper.identity import ProcessIdentity, identify
from tether.keeper.status import read_end

# A call that leaves a child ignoring SIGTERM and holding none of the call's pipes: the
# call ends as soon as its root dies, but the stopper keeps it until the SIGKILL it
# sends after the grace (the child's death shows when that happened).
_LEAVES_A_SURVIVOR = (
    "sh -c \"trap '' TERM; exec sleep 300\" </dev/null >/dev/null 2>&1 & echo $!; exec sleep 300"
)


@contextlib.asynccontextmanager
async def _watching(keeper: KeeperClient) -> AsyncIterator[Watch]:
    watch = await keeper.watch()
    try:
        yield watch
    finally:
        watch.close()


async def _until_ended(watch: Watch, call_ids: Iterable[str], timeout: float = 60.0) -> None:
    left = set(call_ids)
    async with asyncio.timeout(timeout):
        async for event in watch:
            if event["event"] == "ended":
                left.discard(event["call_id"])
                if not left:
                    return
    raise AssertionError(f"the watch closed before {sorted(left)} ended")


def _survivor_of(home: Path, call_id: str) -> ProcessIdentity:
    """The TERM-ignoring child of a `_LEAVES_A_SURVIVOR` call, once it ignores TERM
    (it has exec'd sleep, so the trap ran)."""
    got = wait_for(lambda: output_of(home, call_id), what=f"{call_id}'s output")
    pid = int(got[0].text)
    wait_for(lambda: psutil.Process(pid).cmdline() == ["sleep", "300"], what=f"{pid} to sleep")
    return identify(pid)


def _runner_log(home: Path) -> str:
    return layout.runner_log(home).read_text(errors="replace")


async def test_calls_started_while_stopped_ones_are_let_go_keep_their_descriptors(
    runner_home: Path, keeper: KeeperClient
) -> None:
    """Wave one is stopped together and ends; wave two starts on the descriptor numbers
    wave one freed, before the stopper lets wave one go. Letting it go must not close
    any of them again: wave two's output and ends must all arrive."""
    wave, grace = 50, 5.0
    old = [f"old{i}" for i in range(wave)]
    new = [f"new{i}" for i in range(wave)]
    gate = runner_home / "gate"
    async with _watching(keeper) as watch:
        for call_id in old:
            fields = start_fields(call_id, _LEAVES_A_SURVIVOR, grace=grace)
            await keeper.request("start", **fields)
        survivors = [_survivor_of(runner_home, call_id) for call_id in old]
        await keeper.request("signal", call_ids=old, force=False)
        await _until_ended(watch, old)

        command = f'until [ -e "{gate}" ]; do sleep 0.02; done; echo after'
        for call_id in new:
            await keeper.request("start", **start_fields(call_id, command))
        # Otherwise this test would show nothing (the machine was too slow for the grace).
        assert all(s.is_alive() for s in survivors), "wave two started after the grace"
        wait_for(lambda: not any(s.is_alive() for s in survivors), what="the post-grace kill")
        gate.touch()
        await _until_ended(watch, new)

    for call_id in new:
        assert [r.text for r in output_of(runner_home, call_id)] == ["after\n"], call_id
        end = read_end(layout.call_dir(runner_home, call_id))
        assert end is not None and end.exit_code == 0, (call_id, end)
    for call_id in old:
        end = read_end(layout.call_dir(runner_home, call_id))
        assert end is not None and end.stopped_by == "request", (call_id, end)
    assert (await keeper.request("list"))["calls"] == []
    assert "Traceback" not in _runner_log(runner_home)


async def test_a_call_whose_end_cannot_be_recorded_still_ends_and_sigterm_still_works(
    runner_home: Path, keeper: KeeperClient
) -> None:
    gate = runner_home / "gate"
    async with _watching(keeper) as watch:
        lost = start_fields("lost", f'until [ -e "{gate}" ]; do sleep 0.02; done')
        await keeper.request("start", **lost)
        other = await keeper.request("start", **start_fields("other", "exec sleep 300"))
        # Its directory goes while it runs: status.json cannot be written at its end.
        shutil.rmtree(layout.call_dir(runner_home, "lost"))
        gate.touch()
        await _until_ended(watch, ["lost"], timeout=15)
    listed = (await keeper.request("list"))["calls"]
    assert [c["call_id"] for c in listed] == ["other"]
    assert "the end of call lost could not be recorded" in _runner_log(runner_home)

    runner = runner_of(runner_home)
    os.kill(runner.pid, signal.SIGTERM)
    wait_for(lambda: not runner.is_alive(), what="the runner to exit")
    assert not ProcessIdentity(other["pid"], other["create_time"]).is_alive()
    end = read_end(layout.call_dir(runner_home, "other"))
    assert end is not None and end.stopped_by == "request"


async def test_sigterm_kills_at_once_a_call_already_asked_to_stop(
    runner_home: Path, keeper: KeeperClient
) -> None:
    """A call that ignores SIGTERM, asked to stop with a minute's grace: the runner's
    own SIGTERM does not wait for that minute."""
    stubborn = "trap '' TERM; echo up; exec sleep 300"
    runner = runner_of(runner_home)
    async with _watching(keeper) as watch:
        await keeper.request("start", **start_fields("stubborn", stubborn, grace=60.0))
        wait_for(lambda: output_of(runner_home, "stubborn"), what="the trap")
        await keeper.request("signal", call_id="stubborn", force=False)
        os.kill(runner.pid, signal.SIGTERM)
        await _until_ended(watch, ["stubborn"], timeout=15)
    wait_for(lambda: not runner.is_alive(), what="the runner to exit")
    end = read_end(layout.call_dir(runner_home, "stubborn"))
    assert end is not None
    assert (end.signal, end.stopped_by) == (signal.SIGKILL, "request")


async def test_sigterm_waits_for_the_kill_after_the_grace_before_the_runner_exits(
    runner_home: Path, keeper: KeeperClient
) -> None:
    """The root dies at SIGTERM and the call ends at once, but a child ignoring SIGTERM
    is only killed after the grace: the runner must not exit before that."""
    await keeper.request("start", **start_fields("leaves", _LEAVES_A_SURVIVOR, grace=1.0))
    survivor = _survivor_of(runner_home, "leaves")
    runner = runner_of(runner_home)
    os.kill(runner.pid, signal.SIGTERM)
    wait_for(lambda: not runner.is_alive(), what="the runner to exit")
    assert not survivor.is_alive(), "the runner exited before killing what its call left"
    end = read_end(layout.call_dir(runner_home, "leaves"))
    assert end is not None and end.stopped_by == "request"


async def test_a_new_runner_kills_what_a_dead_runners_call_left_in_its_group(
    runner_home: Path, keeper: KeeperClient
) -> None:
    if not cgroups_here():
        pytest.skip("no writable cgroup hierarchy here")
    # A daemon that left the call's session and cleared its environment: no process
    # group, parent or marker leads to it, only the call's limits group.
    escape = "setsid env -i sh -c 'echo $$; exec sleep 300' & wait"
    await keeper.request("start", **start_fields("esc", escape, limits=LIMITS))
    got = wait_for(lambda: output_of(runner_home, "esc"), what="the daemon's pid")
    daemon = identify(int(got[0].text))
    wait_for(lambda: psutil.Process(daemon.pid).cmdline() == ["sleep", "300"], what="sleep")
    old = runner_of(runner_home)
    os.kill(old.pid, signal.SIGKILL)
    wait_for(lambda: not old.is_alive(), what="the runner to die")
    keeper.close()
    assert daemon.is_alive()  # the runner's death did not reach it

    try:
        await asyncio.to_thread(client.ensure_runner, runner_home)
        wait_for(lambda: not daemon.is_alive(), what="the new runner to kill the daemon")
    finally:
        with contextlib.suppress(psutil.Error):
            if daemon.is_alive():
                psutil.Process(daemon.pid).kill()
    assert "killed" in _runner_log(runner_home)


@pytest.mark.parametrize("grouped", [False, True], ids=["scanned", "in-a-group"])
async def test_a_force_stop_kills_what_the_tree_forks_while_it_is_read(
    runner_home: Path, keeper: KeeperClient, grouped: bool
) -> None:
    """A process forked after the stop read the tree, before the kill: bwrap's sandbox
    child, cloned in a call's first milliseconds, outlived a force stop that way (its
    command running on, or waiting for ever for the go of its killed parent). A fork
    loop stands for it here, forking all along. The fixture fails on what is left."""
    if grouped and not cgroups_here():
        pytest.skip("no cgroups here")
    # Room for the loop: a process limit would stop its forks.
    limits = {**LIMITS, "max_processes": 2000} if grouped else None
    fields = start_fields("forks", "while :; do sleep 300 & done", limits=limits)
    await _stop_a_fork_loop(keeper, fields, force=True)


async def test_a_graceful_stop_kills_what_forks_on_after_the_root_has_gone(
    runner_home: Path, keeper: KeeperClient
) -> None:
    """The root ends at the SIGTERM and is reaped; a child that ignores it forks on through
    the grace, and the kill after it must take in what is forked while it is read. The
    fixture fails on what is left."""
    loop = "sh -c \"trap '' TERM; while :; do sleep 300 & done\" & exec sleep 300"
    # It ends when the root is reaped; the grace runs on.
    await _stop_a_fork_loop(keeper, start_fields("loop", loop), force=False)


async def _stop_a_fork_loop(keeper: KeeperClient, fields: dict[str, Any], force: bool) -> None:
    """Start a call that forks all along, stop it once it has forked a few, and wait for
    nothing of it to be left (its grace is 0.5 s)."""
    async with _watching(keeper) as watch:
        await keeper.request("start", **fields)
        wait_for(lambda: len(marked_processes()) > 20, what="the loop to fork")
        await keeper.request("signal", call_id=fields["call_id"], force=force)
        await _until_ended(watch, [fields["call_id"]])
    wait_for(lambda: not marked_processes(), timeout=5.0, what="nothing left running")


async def test_a_graceful_stop_finds_an_unmarked_member_by_its_group_after_the_reap(
    runner_home: Path, keeper: KeeperClient
) -> None:
    """No limits group: the scan finds a call by group, descendants and marker. A member
    that dropped the marker (``env -i``), ignores SIGTERM and is orphaned when the root
    exits at the SIGTERM is found after the grace by the group's number alone, which the
    runner keeps while the group has a member."""
    command = (
        "trap 'exit 0' TERM; "
        "env -i /bin/sh -c \"trap '' TERM; exec /bin/sleep 300\" & echo $!; wait"
    )
    async with _watching(keeper) as watch:
        await keeper.request("start", **start_fields("unmarked", command))
        got = wait_for(lambda: output_of(runner_home, "unmarked"), what="the member's pid")
        member = int(got[0].text)
        wait_for(lambda: psutil.Process(member).cmdline() == ["/bin/sleep", "300"], what="exec")
        try:
            await keeper.request("signal", call_id="unmarked", force=False)
            await _until_ended(watch, ["unmarked"])
            wait_for(lambda: not _running(member), timeout=5.0, what="the member's kill")
        finally:
            if _running(member):
                os.kill(member, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_stop_after_the_command_exited_leaves_its_end_its_own(
    runner_home: Path, keeper: KeeperClient
) -> None:
    """The command exited 0, leaving a child that holds its output open (the runner
    drains it for a second). A stop asked for then ends the child, and the end on record
    is the command's own: marked as stopped, the server reported a success as cancelled
    (and the model could run the command again)."""
    async with _watching(keeper) as watch:
        started = await keeper.request("start", **start_fields("own", "sleep 300 & echo $!"))
        got = wait_for(lambda: output_of(runner_home, "own"), what="the child's pid")
        child = int(got[0].text)
        wait_for(lambda: not _running(started["pid"]), what="the command's exit")
        await keeper.request("signal", call_id="own", force=False)
        await _until_ended(watch, ["own"])
    end = read_end(layout.call_dir(runner_home, "own"))
    assert end is not None
    assert (end.exit_code, end.signal, end.stopped_by) == (0, None, None)
    # The stop ended it, not the drain's timer: the child is gone and nothing was cut.
    assert not _running(child)
    assert [record.text for record in output_of(runner_home, "own")] == [f"{child}\n"]
