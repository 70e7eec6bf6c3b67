"""The runner's TreeStopper: after the grace, a process that left its call's limits group
is still found by its marker and killed, and the stops whose graces end together share
that costly look (one scan of the process table, not one per stop)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from tether.keeper import stopper as stopper_module
from tether.keeper.stopper import TreeStopper
from tether.toolcalls import process_tree
from tether.toolcalls.launcher import MARKER_VAR
from tether.toolcalls.process_tree import Target

MARKER = "test-stopper:call"


class Call:
    """A call whose limits group is empty: its one process has left the group."""

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.since = time.time() - 60

    def target(self) -> Target:
        return Target(None, None, MARKER, since=self.since, members=list)


@pytest.fixture
def escaped() -> Iterator[subprocess.Popen[bytes]]:
    """A process carrying the call's marker, outside any group, ignoring SIGTERM."""
    env = {**os.environ, MARKER_VAR: MARKER}
    proc = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; echo ready; exec sleep 300"],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    yield proc
    proc.kill()
    proc.wait()
    proc.stdout.close()


async def test_a_process_that_left_its_group_dies_after_the_grace(
    escaped: subprocess.Popen[bytes],
) -> None:
    stopper = TreeStopper(grace=0.05)
    stopper.request(Call("c1"), force=False)
    await stopper.settled()
    assert await asyncio.to_thread(escaped.wait, 5) != 0
    assert not psutil.pid_exists(escaped.pid) or psutil.Process(escaped.pid).status() == "zombie"


async def test_stops_whose_graces_end_together_share_the_last_look(
    escaped: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    looks: list[int] = []
    real = process_tree.find_trees

    def counted(targets: Any, scan_all: bool = False) -> Any:
        if scan_all:
            looks.append(len(targets))
            time.sleep(0.2)  # a scan of a busy machine's process table takes a while
        return real(targets, scan_all)

    monkeypatch.setattr(process_tree, "find_trees", counted)
    stopper = TreeStopper(grace=0.01)
    for i in range(20):
        stopper.request(Call(f"c{i}"), force=False)
        await asyncio.sleep(0.02)  # stop requests that come one after another
    await stopper.settled()
    assert sum(looks) == 20
    assert len(looks) < 10, looks


async def test_a_runner_leaving_looks_at_once(
    escaped: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last look waits for a burst of stops to pass, except when the runner leaves:
    hurried, it looks at once (here the quiet it would wait for is an hour)."""
    monkeypatch.setattr(stopper_module, "SWEEP_QUIET", 3600.0)
    monkeypatch.setattr(stopper_module, "SWEEP_LATEST", 3600.0)
    stopper = TreeStopper(grace=3600.0)
    stopper.request(Call("c1"), force=False)
    await asyncio.sleep(0)  # the stop's first pass is under way
    stopper.hurry()
    async with asyncio.timeout(30):
        await stopper.settled()
    assert await asyncio.to_thread(escaped.wait, 5) != 0


async def test_the_last_look_takes_the_calls_targets_when_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group that empties between the grace's end and the look (up to SWEEP_LATEST)
    must not be looked for by its number: the number may be another group's by then."""

    class Emptying(Call):
        """Its group's number is given up from the third look at it on (the request's
        and the grace's end's come first)."""

        asked = 0

        def target(self) -> Target:
            self.asked += 1
            pgid = 999_999 if self.asked < 3 else None
            return Target(None, pgid, MARKER, since=self.since, members=list)

    looked: list[int | None] = []
    real = process_tree.find_trees

    def recorded(targets: Any, scan_all: bool = False) -> Any:
        if scan_all:
            looked.extend(t.pgid for t in targets)
        return real(targets, scan_all)

    monkeypatch.setattr(process_tree, "find_trees", recorded)
    stopper = TreeStopper(grace=0.01)
    stopper.request(Emptying("c1"), force=False)
    await stopper.settled()
    assert looked == [None]
