"""The server's side of the keeper with a real runner: start, follow, stop, and find
calls again from another hub, as a restarted server does."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from keeper_support import MARKER_PREFIX, kill_marked, marked_processes, runner_of

from tether.keeper import layout
from tether.keeper.client import KeeperClient
from tether.keeper.hub import KeeperHub
from tether.keeper.launcher import KeeperLauncher
from tether.keeper.process import CallLost, KeeperProcess
from tether.keeper.protocol import ProtocolError
from tether.keeper.status import read_end
from tether.toolcalls.launcher import LaunchSpec


def Spec(call_id: str, command: str, kill_after: float | None = 60.0) -> LaunchSpec:
    return LaunchSpec(
        argv=("/bin/sh", "-c", command),
        cwd=Path("/"),
        env={"PATH": os.environ["PATH"]},
        marker=f"{MARKER_PREFIX}:{call_id}",
        started_at=time.time(),
        call_id=call_id,
        kill_after=kill_after,
    )


@pytest.fixture
async def hub(runner_home: Path) -> AsyncIterator[KeeperHub]:
    opened = KeeperHub(runner_home)
    await opened.open()
    yield opened
    await opened.close()


@contextlib.asynccontextmanager
async def restarted(home: Path) -> AsyncIterator[KeeperLauncher]:
    """The launcher of a server started after the first went away."""
    second_hub = KeeperHub(home)
    await second_hub.open()
    try:
        yield KeeperLauncher(second_hub, output_limit=None, grace=0.5)
    finally:
        await second_hub.close()


async def collect(process: KeeperProcess) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    await process.follow(lambda stream, text: seen.append((stream, text)))
    return seen


def as_text(chunks: list[tuple[str, str]]) -> dict[str, str]:
    """Each stream's text, in order, however the runner cut it into records."""
    text: dict[str, str] = {}
    for stream, part in chunks:
        text[stream] = text.get(stream, "") + part
    return text


async def test_a_call_is_followed_to_its_exit_code(hub: KeeperHub) -> None:
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("a", "echo hello; echo oops >&2; exit 7"))
    seen = await collect(process)
    assert sorted(seen) == [("stderr", "oops\n"), ("stdout", "hello\n")]
    assert await process.wait() == 7


async def test_stop_ends_the_call_by_signal(hub: KeeperHub) -> None:
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("b", "echo up; exec sleep 300"))
    await launcher.stop([process], grace=0.5, force=False)
    assert await process.wait() == -signal.SIGTERM


async def test_the_runner_enforces_the_deadline_it_was_given(hub: KeeperHub) -> None:
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("c", "exec sleep 300", kill_after=0.5))
    assert await process.wait() == -signal.SIGTERM
    end = read_end(process.directory)
    assert end is not None and end.stopped_by == "deadline"


async def test_moving_the_deadline_of_a_call_that_just_ended_is_no_error(
    hub: KeeperHub,
) -> None:
    # An extend racing the call's end: the runner has dropped the call, the server has
    # not yet read its end. It answered 500 (and a call extended while its tree started
    # failed with "no running call" though its command succeeded).
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("c2", "echo done; exit 3"))
    while "c2" in await launcher.running():
        await asyncio.sleep(0.01)
    await process.set_kill_deadline(30.0)
    await process.set_kill_deadline(None)
    assert as_text(await collect(process)) == {"stdout": "done\n"}
    assert await process.wait() == 3


async def test_moving_the_deadline_of_a_call_the_runner_never_ran_is_an_error(
    hub: KeeperHub,
) -> None:
    process = KeeperProcess(hub, "never-started", 0)
    with pytest.raises(ProtocolError):
        await process.set_kill_deadline(30.0)


async def test_another_hub_adopts_a_running_call_and_reads_all_its_output(
    runner_home: Path, hub: KeeperHub
) -> None:
    gate = runner_home / "gate"
    first = KeeperLauncher(hub, output_limit=None, grace=0.5)
    started = await first.start(
        Spec("d", f'echo one; until [ -e "{gate}" ]; do sleep 0.02; done; echo two')
    )
    await hub.close()  # the first server goes away
    async with restarted(runner_home) as second:
        running = await second.running()
        assert running["d"]["pid"] == started.pgid
        adopted = second.adopt("d", started.pgid, running=True)
        gate.touch()
        # The runner may read both lines in one go (a loaded machine): one record.
        assert as_text(await collect(adopted)) == {"stdout": "one\ntwo\n"}
        assert await adopted.wait() == 0


async def test_a_call_that_ended_unwatched_is_read_from_its_files(
    runner_home: Path, hub: KeeperHub
) -> None:
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("e", "echo done; exit 4"))
    assert await process.wait() == 4
    await hub.close()
    async with restarted(runner_home) as second:
        assert "e" not in await second.running()
        adopted = second.adopt("e", process.pgid, running=False)
        assert await collect(adopted) == [("stdout", "done\n")]
        assert await adopted.wait() == 4


async def test_a_corrupt_status_file_loses_the_call_naming_the_file(
    runner_home: Path, hub: KeeperHub
) -> None:
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("f", "echo x"))
    await process.wait()
    status = layout.call_dir(runner_home, "f") / layout.STATUS_NAME
    status.write_bytes(b'{"exit_code": 0, "sig')
    adopted = launcher.adopt("f", process.pgid, running=False)
    with pytest.raises(CallLost, match=str(status)):
        await adopted.wait()


async def test_a_truncated_output_file_loses_the_call_naming_the_file(
    runner_home: Path, hub: KeeperHub
) -> None:
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("g", "echo some output here"))
    await process.wait()
    output = layout.call_dir(runner_home, "g") / layout.OUTPUT_NAME
    output.write_bytes(output.read_bytes()[:5])
    adopted = launcher.adopt("g", process.pgid, running=False)
    with pytest.raises(CallLost, match=f"{output} is truncated"):
        await collect(adopted)


async def test_a_runner_killed_mid_call_loses_it_saying_what_was_lost(
    runner_home: Path, hub: KeeperHub
) -> None:
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("h", "echo started; exec sleep 300"))
    os.kill(runner_of(runner_home).pid, signal.SIGKILL)
    try:
        with pytest.raises(CallLost, match="its exit status is lost"):
            await collect(process)
    finally:
        kill_marked()


async def test_a_new_call_after_the_runner_died_gets_a_new_runner(
    runner_home: Path, hub: KeeperHub
) -> None:
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    first = await launcher.start(Spec("i", "exec sleep 300"))
    dead = runner_of(runner_home)
    os.kill(dead.pid, signal.SIGKILL)
    try:
        with pytest.raises(CallLost):
            await first.wait()
        again = await launcher.start(Spec("j", "echo fresh"))
        assert await collect(again) == [("stdout", "fresh\n")]
        assert await again.wait() == 0
        assert runner_of(runner_home) != dead
    finally:
        kill_marked()


async def test_a_call_whose_end_the_runner_could_not_record_is_lost_not_awaited(
    runner_home: Path, hub: KeeperHub
) -> None:
    gate = runner_home / "gate"
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    process = await launcher.start(Spec("k", f'until [ -e "{gate}" ]; do sleep 0.02; done'))
    # Its directory goes while it runs: the runner says "ended" with no status.json.
    shutil.rmtree(layout.call_dir(runner_home, "k"))
    gate.touch()
    with pytest.raises(CallLost, match=r"could not record its end .* exit status is lost"):
        await asyncio.wait_for(process.wait(), 30)


async def test_a_start_cancelled_in_flight_leaves_no_tree_and_no_stray_answer(
    runner_home: Path, hub: KeeperHub
) -> None:
    """A turn stopped while its call starts: the runner may start the tree anyway, so
    it is killed once the answer comes; and the next request gets its own answer."""
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    starting = asyncio.create_task(launcher.start(Spec("cancelled", "exec sleep 300")))
    await asyncio.sleep(0)  # let it send the request
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    status = layout.call_dir(runner_home, "cancelled") / layout.STATUS_NAME
    deadline = time.monotonic() + 15
    while not status.exists():
        assert time.monotonic() < deadline, "the cancelled start's tree was not stopped"
        await asyncio.sleep(0.02)
    end = read_end(layout.call_dir(runner_home, "cancelled"))
    assert end is not None and end.signal == signal.SIGKILL
    assert await launcher.running() == {}
    assert marked_processes() == []


async def test_a_request_cancelled_before_its_answer_does_not_shift_the_next(
    runner_home: Path,
) -> None:
    client = KeeperClient(runner_home)
    try:
        await client.hello()  # the connection is open: the next request is sent at once
        hello = asyncio.create_task(client.request("hello"))
        await asyncio.sleep(0)  # sent, waiting for the answer
        hello.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hello
        assert (await client.request("list")) == {"ok": True, "calls": []}
    finally:
        client.close()


async def test_a_watch_the_runner_drops_is_taken_again(hub: KeeperHub) -> None:
    """The runner drops a watcher that leaves 1 MiB of events unread (a server paused,
    or swamped by output): the hub took that for the runner's death, and every call it
    followed was lost. The drop is made here by closing the watch, since a loaded
    machine cannot be made to pile up a megabyte of events on demand."""
    launcher = KeeperLauncher(hub, output_limit=None, grace=0.5)
    first = await launcher.start(Spec("rewatch-1", "echo early"))
    await asyncio.wait_for(first.wait(), 10)
    running = await launcher.start(Spec("rewatch-2", "sleep 0.5; echo late"))
    ended_meanwhile = await launcher.start(Spec("rewatch-3", "echo quick"))
    assert hub.watch is not None
    dropped = hub.watch
    dropped.close()
    # Both end, by their events or their status files, and neither is lost.
    assert await asyncio.wait_for(running.wait(), 10) == 0
    assert await asyncio.wait_for(ended_meanwhile.wait(), 10) == 0
    assert hub.watch is not dropped
    # The new watch carries the next call's end.
    after = await launcher.start(Spec("rewatch-4", "echo after"))
    assert await asyncio.wait_for(after.wait(), 10) == 0
