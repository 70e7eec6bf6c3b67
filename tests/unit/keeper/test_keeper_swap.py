"""A runner of another version, kept for its calls, replaced by the first start that
finds it idle: with real runners (the first one passes for another version's), and
starts cancelled at the swap's worst moments."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from keeper_support import runner_of
from test_keeper_launcher import Spec

from tether.keeper import client as client_module
from tether.keeper.client import RunnerInfo
from tether.keeper.hub import KeeperHub
from tether.keeper.launcher import KeeperLauncher
from tether.keeper.process import CallLost


@pytest.fixture
async def kept(runner_home: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[KeeperLauncher]:
    """A launcher over the home's runner, which passes for another version's, kept after
    its one call (``exit 0``) has ended."""
    old = runner_of(runner_home)
    another = property(lambda info: info.identity == old)
    monkeypatch.setattr(RunnerInfo, "of_another_version", another)
    hub = KeeperHub(runner_home)
    assert (await hub.open()).of_another_version
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    first = await launcher.start(Spec("first", "exit 0"))
    assert await asyncio.wait_for(first.wait(), 10) == 0
    launcher.kept = True
    yield launcher
    await hub.close()


async def _runner_killed_is_noticed(launcher: KeeperLauncher, home: Path) -> None:
    """A call under the runner now in place is reported lost, at once, when the runner
    dies: the hub watches it."""
    call = await launcher.start(Spec("watched", "sleep 30"))
    os.kill(runner_of(home).pid, signal.SIGKILL)
    with pytest.raises(CallLost):
        await asyncio.wait_for(call.wait(), 10)


async def test_the_first_start_to_find_it_idle_replaces_it(
    kept: KeeperLauncher, runner_home: Path
) -> None:
    old = runner_of(runner_home)
    call = await kept.start(Spec("next", "exit 4"))
    assert not kept.kept and not old.is_alive()
    assert runner_of(runner_home) != old
    assert await asyncio.wait_for(call.wait(), 10) == 4
    await _runner_killed_is_noticed(kept, runner_home)


async def test_a_busy_kept_runner_is_kept(kept: KeeperLauncher, runner_home: Path) -> None:
    old = runner_of(runner_home)
    kept.kept = False  # the busy call is one it ran before this server came
    busy = await kept.start(Spec("busy", "sleep 30"))
    kept.kept = True
    beside = await kept.start(Spec("beside", "exit 0"))
    assert await asyncio.wait_for(beside.wait(), 10) == 0
    assert kept.kept and runner_of(runner_home) == old
    await kept.stop([busy], 0.5, force=True)
    await asyncio.wait_for(busy.wait(), 10)


async def test_a_start_cancelled_while_the_new_runner_opens_leaves_it_watched(
    kept: KeeperLauncher, runner_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut there, the swap left the new runner with no watch: its calls' ends were seen
    only by the slow look, and its death never."""
    old = runner_of(runner_home)
    hub = kept.hub
    opening, watch = asyncio.Event(), hub.client.watch

    async def slow_watch() -> object:
        opening.set()
        await asyncio.sleep(0.3)
        return await watch()

    monkeypatch.setattr(hub.client, "watch", slow_watch)
    start = asyncio.create_task(kept.start(Spec("cut", "exit 0")))
    await asyncio.wait_for(opening.wait(), 15)
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    assert not kept.kept and not old.is_alive()
    await _runner_killed_is_noticed(kept, runner_home)


async def test_a_start_cancelled_during_the_swap_starts_nothing(
    kept: KeeperLauncher, runner_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while the swap waited for the old watch to end, the start went on (the
    wait swallowed its cancel). It is cancelled twice here (at each close of the old
    runner's connection): the swap still runs to its end before the start gives up."""
    hub = kept.hub
    close = hub.client.close
    start: asyncio.Task[object] | None = None

    def close_then_cancel() -> None:
        close()
        if start is not None and not start.done():
            asyncio.get_running_loop().call_soon(start.cancel)

    monkeypatch.setattr(hub.client, "close", close_then_cancel)
    start = asyncio.create_task(kept.start(Spec("cancelled", "exit 0")))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(start, 15)
    monkeypatch.setattr(hub.client, "close", close)
    assert not kept.kept
    assert (await kept.running()) == {}


async def test_requests_made_during_the_swap_wait_for_the_new_runner(
    kept: KeeperLauncher, runner_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the old runner's exit and the new one's start there is no runner at all:
    a list, a stop or an extend then failed."""
    old = runner_of(runner_home)
    hub = kept.hub
    opening, open_runner = asyncio.Event(), hub.open

    async def slow_open() -> RunnerInfo:
        opening.set()  # the old runner is gone
        await asyncio.sleep(0.2)
        return await open_runner()

    monkeypatch.setattr(hub, "open", slow_open)
    start = asyncio.create_task(kept.start(Spec("after", "exit 0")))
    await asyncio.wait_for(opening.wait(), 15)
    listed = await asyncio.wait_for(kept.running(), 15)  # answered by the new runner
    assert set(listed) <= {"after"}
    call = await start
    assert await asyncio.wait_for(call.wait(), 10) == 0
    assert runner_of(runner_home) != old and not kept.kept


async def test_a_request_cut_by_the_swap_is_answered_by_the_new_runner(
    kept: KeeperLauncher, runner_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop sent to the old runner just as the swap closed its connection (after the
    idle check) failed: the runner was idle, so the new one can answer it."""
    old = runner_of(runner_home)
    hub = kept.hub
    in_flight, closed = asyncio.Event(), asyncio.Event()
    ask, close, replace = client_module._ask, hub.client.close, hub.replace
    stopping: list[asyncio.Task[dict[str, object]]] = []

    async def held_ask(reader: object, writer: object, message: bytes) -> bytes:
        if b'"op":"signal"' in message and not in_flight.is_set():
            in_flight.set()
            await closed.wait()
        return await ask(reader, writer, message)  # type: ignore[arg-type]

    def close_and_tell() -> None:
        close()
        closed.set()

    async def replace_with_a_stop_in_flight(info: RunnerInfo) -> RunnerInfo:
        stopping.append(asyncio.create_task(hub.request("signal", call_ids=["first"])))
        await asyncio.wait_for(in_flight.wait(), 10)
        return await replace(info)

    monkeypatch.setattr(client_module, "_ask", held_ask)
    monkeypatch.setattr(hub.client, "close", close_and_tell)
    monkeypatch.setattr(hub, "replace", replace_with_a_stop_in_flight)
    call = await asyncio.wait_for(kept.start(Spec("after", "exit 0")), 15)

    assert await asyncio.wait_for(stopping[0], 15) == {"ok": True, "gone": ["first"]}
    assert runner_of(runner_home) != old and not kept.kept
    assert await asyncio.wait_for(call.wait(), 10) == 0
