"""The server's own launcher (``TETHER_KEEPER=0``): a background child that keeps the
call's output open holds the call's end for the drain time only; a stop finds a member
of the call's group that carries no marker after the root is reaped; the root's exit
status survives a stop; a failing output sink leaves the loop sound."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tether import model_texts
from tether.toolcalls.launcher import MARKER_VAR, LaunchSpec
from tether.toolcalls.local_launcher import LocalLauncher, LocalProcess


def _marked(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARKER_VAR) == marker:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _spec(command: str, tmp_path: Path, marker: str) -> LaunchSpec:
    return LaunchSpec(
        ["/bin/sh", "-c", command], tmp_path, {"PATH": os.environ["PATH"]}, marker, time.time()
    )


class Output:
    """A sink keeping each stream's text."""

    def __init__(self) -> None:
        self.text = {"stdout": "", "stderr": ""}
        self.came = asyncio.Event()

    def __call__(self, stream: str, text: str) -> None:
        self.text[stream] += text
        self.came.set()


async def test_a_background_child_holding_the_output_holds_the_end_for_the_drain_only(
    tmp_path: Path,
) -> None:
    marker = f"local-drain-{os.getpid()}"
    launcher = LocalLauncher()
    tree = await launcher.start(_spec("sleep 300 & echo started", tmp_path, marker))
    got = Output()
    try:
        # Before: follow (and wait) returned only when `sleep 300` exited.
        await asyncio.wait_for(tree.follow(got), timeout=30)
        assert await asyncio.wait_for(tree.wait(), timeout=5) == 0
        assert got.text == {"stdout": "started\n", "stderr": model_texts.OUTPUT_KEPT_OPEN}
        assert [p.name() for p in _marked(marker)] == ["sleep"], "the child ran on"
    finally:
        await launcher.stop([tree], grace=0.0, force=True)
    assert _marked(marker) == []


async def test_a_member_without_the_marker_is_found_by_the_group_after_the_reap(
    tmp_path: Path,
) -> None:
    """``env -i`` drops the marker and the root's exit orphans it: only the group's
    number, kept while the group has a member, still finds it."""
    launcher = LocalLauncher()
    command = "env -i /bin/sleep 300 & echo $!; exit 0"
    tree = await launcher.start(_spec(command, tmp_path, f"local-kept-{os.getpid()}"))
    got = Output()
    following = asyncio.ensure_future(tree.follow(got))
    try:
        await tree.wait()
        await got.came.wait()
        member = int(got.text["stdout"].split()[0])
        assert tree.target().root_pid is None  # reaped: its pid names it no more
        await launcher.stop([tree], grace=0.2, force=False)
        assert not _alive(member), "the unmarked member survived the stop"
    finally:
        await following
        if "member" in locals() and _alive(member):
            os.kill(member, signal.SIGKILL)


async def test_calls_stopped_gracefully_end_by_sigterm(tmp_path: Path) -> None:
    """The stop waited for the trees by reaping them (psutil), in its own thread: the
    server's wait on a root it reaped found nothing (exit code 255), now and then."""
    launcher = LocalLauncher()
    trees: list[LocalProcess] = []
    following = []
    for i in range(8):
        started = Output()
        tree = await launcher.start(_spec("echo up; exec sleep 300", tmp_path, f"local-term-{i}"))
        following.append(asyncio.ensure_future(tree.follow(started)))
        await started.came.wait()
        trees.append(tree)
    for tree in trees:
        await launcher.stop([tree], grace=2.0, force=False)
    await asyncio.gather(*following)
    assert [await t.wait() for t in trees] == [-signal.SIGTERM] * 8


async def test_a_sink_that_fails_leaves_no_reader_behind(tmp_path: Path) -> None:
    """The failure ends follow, and the other stream's reader ends with it before its
    pipe is closed: left running, it kept the loop watching a closed descriptor, and the
    next pipe given that number never delivered a byte."""
    launcher = LocalLauncher()
    # The child holds stderr open; stdout's text makes the sink fail.
    command = "sleep 300 >/dev/null & echo out"
    tree = await launcher.start(_spec(command, tmp_path, f"local-sink-{os.getpid()}"))

    def sink(stream: str, text: str) -> None:
        if stream == "stdout" and text:
            raise RuntimeError("the sink failed")

    try:
        with pytest.raises(RuntimeError, match="the sink failed"):
            await asyncio.wait_for(tree.follow(sink), timeout=30)
        assert asyncio.all_tasks() == {asyncio.current_task()}
    finally:
        await launcher.stop([tree], grace=0.0, force=True)
