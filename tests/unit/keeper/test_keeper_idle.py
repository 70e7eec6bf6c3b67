"""When a runner goes away by itself: at a graceful stop of a server that left it
nothing to run, and, once its calls have ended, after its idle time with no server
connected; never while a call runs or a server is connected."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from keeper_support import kill_marked, runner_of, start_fields, unsandboxed

from tether.keeper import client, layout
from tether.keeper.client import KeeperClient
from tether.keeper.hub import KeeperHub
from tether.keeper.startup import leave_keeper, start_keeper

# Short, so a test sees it go; calls that must outlive it take several of these.
_IDLE = 0.3


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A home whose runner (if one is left) and calls are stopped afterwards."""
    home = tmp_path / "home"
    yield home
    client.stop_runner(home)
    kill_marked()


async def _wait_gone(home: Path) -> None:
    identity = runner_of(home)
    assert await asyncio.to_thread(client.wait_gone, identity, 15.0), "the runner stayed"


async def test_an_idle_runner_exits_once_no_call_runs_and_no_server_is_connected(
    home: Path,
) -> None:
    client.ensure_runner(home, _IDLE)
    keeper = KeeperClient(home)
    watch = await keeper.watch()
    try:
        # The call lasts several idle times while a connection is open, and ends
        # while one still is: the runner is there to report it, and answers after.
        await keeper.request("start", **start_fields("long", f"sleep {_IDLE * 4}"))
        async for event in watch:
            if (event["event"], event["call_id"]) == ("ended", "long"):
                break
        info = await keeper.hello()
        assert (info.calls, info.retiring, info.idle_exit) == (0, False, _IDLE)
    finally:
        watch.close()
        keeper.close()
    await _wait_gone(home)
    assert not layout.runner_file(home).exists()


async def test_a_runner_with_a_call_stays_with_no_server_connected(home: Path) -> None:
    client.ensure_runner(home, _IDLE)
    keeper = KeeperClient(home)
    try:
        await keeper.request("start", **start_fields("alone", f"sleep {_IDLE * 4}"))
    finally:
        keeper.close()
    # Nobody is connected; the runner still records the end, several idle times later,
    # and only then goes.
    status = layout.call_dir(home, "alone") / layout.STATUS_NAME
    runner = runner_of(home)
    assert await asyncio.to_thread(client.wait_gone, runner, 15.0)
    assert status.exists(), "the runner left before its call ended"


async def test_a_stop_with_no_call_running_takes_the_runner_with_it(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    launcher = await start_keeper(*await unsandboxed(home))
    runner = runner_of(home)
    with caplog.at_level(logging.INFO, logger="tether.keeper.startup"):
        await leave_keeper(launcher)
    assert not runner.is_alive()
    assert f"no call running; runner pid {runner.pid} exits with the server" in caplog.text


async def test_a_stop_with_a_call_running_leaves_both_and_says_so(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    launcher = await start_keeper(*await unsandboxed(home))
    runner = runner_of(home)
    await launcher.hub.request("start", **start_fields("kept", "exec sleep 300"))
    with caplog.at_level(logging.INFO, logger="tether.keeper.startup"):
        await leave_keeper(launcher)
    assert (
        f"leaving 1 call(s) running under the keeper (runner pid {runner.pid}); they are "
        "adopted at the next start" in caplog.text
    )
    keeper = KeeperClient(home)
    try:
        listed = await keeper.request("list")
    finally:
        keeper.close()
    assert [c["call_id"] for c in listed["calls"]] == ["kept"]
    assert runner_of(home) == runner


async def test_a_server_arriving_as_the_runner_leaves_gets_a_new_one(home: Path) -> None:
    client.ensure_runner(home)
    old = runner_of(home)
    gate = home / "gate"
    keeper = KeeperClient(home)
    try:
        command = f'while [ ! -e "{gate}" ]; do sleep 0.02; done'
        await keeper.request("start", **start_fields("last", command))
        await keeper.request("retire")  # takes no new call, leaves when this one ends
    finally:
        keeper.close()
    hub = KeeperHub(home, _IDLE)
    opening = asyncio.create_task(hub.open())
    gate.touch()
    try:
        info = await opening
        assert info.identity != old and not info.retiring
        assert not old.is_alive()
    finally:
        await hub.close()
