"""What a starting server does with a runner of a protocol it does not speak (one left
by a much newer or older Tether): replaced when idle, refused (its calls kept) when
not. A runner it can speak to is covered end to end by the upgrade integration test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from keeper_support import MARKER_PREFIX, kill_marked, marked_processes

from tether.config import Settings
from tether.keeper import client, protocol
from tether.keeper.client import KeeperClient, RunnerIncompatible
from tether.keeper.identity import ProcessIdentity
from tether.keeper.startup import start_keeper
from tether.sandbox.service import Sandbox
from tether.sandbox.setup import sandbox_for

# A runner of this very code whose protocol range is 9 to 9: no number in common.
_FOREIGN = """
import sys
from pathlib import Path
from tether.keeper import protocol
protocol.PROTOCOL = protocol.OLDEST = 9
from tether.keeper.runner import serve
sys.exit(serve(Path(sys.argv[1])))
"""


@pytest.fixture
def foreign_runner(tmp_path: Path) -> Iterator[tuple[Path, ProcessIdentity]]:
    """A home served by a runner speaking protocol 9 only (stopped afterwards, with
    its calls)."""
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _FOREIGN, str(home)])
    try:
        deadline = time.monotonic() + 15
        while (found := client.recorded_runner(home)) is None:
            assert proc.poll() is None and time.monotonic() < deadline, "no foreign runner"
            time.sleep(0.02)
        yield home, found
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        client.stop_runner(home)  # the runner that replaced it, if any
        kill_marked()


async def test_a_busy_runner_we_cannot_speak_to_is_refused_and_keeps_its_call(
    foreign_runner: tuple[Path, ProcessIdentity],
) -> None:
    home, runner = foreign_runner
    foreign = KeeperClient(home)
    foreign.spoken = 9
    try:
        await foreign.request(
            "start",
            call_id="kept",
            argv=["/bin/sh", "-c", "exec sleep 300"],
            cwd="/",
            env={"PATH": os.environ["PATH"]},
            marker=f"{MARKER_PREFIX}:kept",
        )
        with pytest.raises(RunnerIncompatible) as refused:
            await start_keeper(*await _unsandboxed(home))
        said = str(refused.value)
        assert f"runner pid {runner.pid}" in said and "protocols 9 to 9" in said
        assert f"speaks protocols {protocol.OLDEST} to {protocol.PROTOCOL} only" in said
        assert f"kill -TERM {runner.pid}" in said
        assert runner.is_alive()
        assert [c["call_id"] for c in (await foreign.request("list"))["calls"]] == ["kept"]
        assert len(marked_processes()) == 1
    finally:
        foreign.close()


async def test_an_idle_runner_we_cannot_speak_to_is_replaced(
    foreign_runner: tuple[Path, ProcessIdentity],
) -> None:
    home, old = foreign_runner
    launcher = await start_keeper(*await _unsandboxed(home))
    try:
        assert not old.is_alive()
        info = await launcher.hub.client.hello()
        assert (info.protocol, info.identity) == (protocol.PROTOCOL, client.recorded_runner(home))
        assert launcher.hub.client.spoken == protocol.PROTOCOL
    finally:
        await launcher.hub.close()


async def _unsandboxed(home: Path) -> tuple[Settings, Sandbox]:
    """What start_keeper takes, for a home whose calls run without the sandbox."""

    async def no_settings(session_id: str) -> None:
        return None

    settings = Settings(home=home, sandbox="off")
    return settings, await sandbox_for(settings, no_settings, "test-keeper-startup")
