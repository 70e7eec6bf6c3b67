"""The runner with its home on a disk that fills up (a small tmpfs of its own): a call
runs on while its output cannot be written, says what was lost once it can, and its end
is recorded even on a disk that is still full."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from keeper_support import live_runner, output_of, start_fields, wait_for

from disk_support import fill, needs_root, small_disk
from tether.keeper import layout, protocol
from tether.keeper.client import KeeperClient, Watch
from tether.keeper.runner import Runner
from tether.keeper.status import read_end, read_spec
from tether.sandbox.rlimits import Rlimits
from tether.waits import within

pytestmark = needs_root

# Prints "before", then (once the gate "full" is there) LOST bytes, then (once "room"
# is there) "after". After each print it waits until the runner has read it all (the
# pipe is empty), then says so with a file: the test fills or frees the disk knowing
# which output met which disk.
LOST = 100_000
_SCRIPT = """
import fcntl, os, pathlib, struct, sys, termios, time
gates = pathlib.Path(sys.argv[1])
def say(data, done):
    os.write(1, data)
    while struct.unpack("i", fcntl.ioctl(1, termios.FIONREAD, b"0000"))[0]:
        time.sleep(0.01)
    (gates / done).touch()
def wait(gate):
    while not (gates / gate).exists():
        time.sleep(0.01)
say(b"before\\n", "said-before")
wait("full")
say(b"x" * int(sys.argv[2]), "said-lost")
wait("room")
say(b"after\\n", "said-after")
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "disk", "2m") as disk, live_runner(disk / "home") as home:
        yield home


@pytest.fixture
async def watch(home: Path) -> AsyncIterator[tuple[KeeperClient, Watch]]:
    keeper = KeeperClient(home)
    watching = await keeper.watch()
    yield keeper, watching
    watching.close()
    keeper.close()


async def _ended(watch: Watch, call_id: str) -> None:
    async for event in watch:
        if event["event"] == "ended" and event["call_id"] == call_id:
            return
    raise AssertionError("the watch closed before the call ended")


async def test_output_lost_on_a_full_disk_is_noted_and_the_call_runs_on(
    home: Path, watch: tuple[KeeperClient, Watch], tmp_path: Path
) -> None:
    """A write the disk refused raised: the runner killed the call, and could not
    record its end either."""
    keeper, events = watch
    argv = [sys.executable, "-c", _SCRIPT, str(tmp_path), str(LOST)]
    await keeper.request("start", **{**start_fields("c1", ""), "argv": argv})
    wait_for((tmp_path / "said-before").exists, what="the first line")
    filler = fill(home.parent)
    (tmp_path / "full").touch()
    wait_for((tmp_path / "said-lost").exists, what="the lines the disk has no room for")
    filler.unlink()
    (tmp_path / "room").touch()
    await _ended(events, "c1")

    end = read_end(layout.call_dir(home, "c1"))
    assert end is not None
    assert (end.exit_code, end.signal, end.dropped_bytes) == (0, None, LOST)
    got = output_of(home, "c1")
    assert (got[0].stream, got[0].text) == ("stdout", "before\n")
    assert (got[-1].stream, got[-1].text) == ("stdout", "after\n")
    # One note per stretch lost: a short note may fit in the file's last block, which
    # the disk gave it before it was full, between two reads it has no room for.
    notes = got[1:-1]
    assert notes and all(n.stream == "stderr" for n in notes), notes
    said = [re.search(r"(\d+) bytes of this call's output were lost", n.text) for n in notes]
    assert sum(int(m.group(1)) for m in said if m) == LOST, notes
    assert all("(No space left on device)" in n.text for n in notes), notes
    assert got[-1].end == end.output_end


async def test_an_end_on_a_full_disk_is_recorded(
    home: Path, watch: tuple[KeeperClient, Watch], tmp_path: Path
) -> None:
    """The status file could not be made: the call's exit status was lost."""
    keeper, events = watch
    gate = tmp_path / "gate"
    await keeper.request(
        "start", **start_fields("c1", f"until [ -e {gate} ]; do sleep 0.01; done; exit 3")
    )
    wait_for((layout.call_dir(home, "c1") / layout.SPEC_NAME).exists, what="the call's spec")
    fill(home.parent)
    gate.touch()
    await _ended(events, "c1")
    end = read_end(layout.call_dir(home, "c1"))
    assert end is not None
    assert (end.exit_code, end.signal, end.output_end) == (3, None, 0)


async def test_a_spec_is_recorded_though_the_disk_filled_as_the_call_started(
    tmp_path: Path,
) -> None:
    """The runner answers a start, then writes the call's spec: a disk that filled in
    between left the call without its call.json (after a restart: a call whose process
    and end nobody could find). A runner in this process, so the disk fills exactly
    there."""
    gate = tmp_path / "gate"
    command = f"until [ -e {gate} ]; do sleep 0.01; done"
    request = {"v": protocol.PROTOCOL, "op": "start", **start_fields("c1", command)}
    with small_disk(tmp_path / "disk", "2m") as disk:
        runner = Runner(disk / "home", Rlimits())
        answer = runner._answer(protocol.encode(request), None)  # type: ignore[arg-type]
        assert answer is not None and answer["ok"], answer
        try:
            fill(disk)
            await asyncio.sleep(0)  # the loop writes the spec now, after the answer
            spec = read_spec(layout.call_dir(disk / "home", "c1"))
            assert spec is not None
            assert (spec.pid, spec.started_at) == (answer["pid"], answer["started_at"])
        finally:
            gate.touch()
            await within(_reaped(runner), 15)


async def _reaped(runner: Runner) -> None:
    """Until the runner has reaped its calls (on this loop)."""
    while runner.calls:
        await asyncio.sleep(0.01)
