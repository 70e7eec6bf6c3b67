"""Helpers for the keeper tests (the fixture is in conftest.py)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from tether.config import Settings
from tether.keeper import client, layout, records
from tether.keeper.client import KeeperClient
from tether.keeper.identity import ProcessIdentity
from tether.sandbox import enforcers
from tether.sandbox.service import Sandbox
from tether.sandbox.setup import sandbox_for
from tether.toolcalls.launcher import MARKER_VAR

MARKER_PREFIX = f"keeper-test-{os.getpid()}"
SH = "/bin/sh"


@contextlib.contextmanager
def live_runner(home: Path) -> Iterator[Path]:
    """A runner for ``home``; afterwards it and all marked processes are gone (the
    runner outlives its clients by design, so it must be stopped)."""
    identity = client.ensure_runner(home)
    yield home
    client.stop_runner(home)
    assert not identity.is_alive(), "the runner survived its fixture"
    # A runner killed by the test left its limits groups; cgroup directories outlive
    # the test's home.
    enforcers.choose(enforcers.runner_tag(home)).close()
    leftovers = marked_processes()
    for proc in leftovers:
        proc.kill()
    assert not leftovers, f"processes left running: {leftovers}"


def start_fields(call_id: str, command: str, **extra: Any) -> dict[str, Any]:
    """A ``start`` request's fields for ``sh -c command``, marked as these tests'."""
    return {
        "call_id": call_id,
        "argv": [SH, "-c", command],
        "cwd": "/",
        "env": {"PATH": os.environ["PATH"]},
        "marker": f"{MARKER_PREFIX}:{call_id}",
        "grace": 0.5,
        **extra,
    }


async def run_to_end(keeper: KeeperClient, call_id: str, command: str, **extra: Any) -> None:
    """Start a call and return once the runner says it ended."""
    watch = await keeper.watch()
    try:
        await keeper.request("start", **start_fields(call_id, command, **extra))
        async for event in watch:
            if event["event"] == "ended" and event["call_id"] == call_id:
                return
    finally:
        watch.close()
    raise AssertionError("the watch closed before the call ended")


def output_of(home: Path, call_id: str) -> list[records.Record]:
    """The call's output records so far."""
    got, _ = records.read_records(layout.call_dir(home, call_id) / layout.OUTPUT_NAME, 0)
    return got


def wait_for(probe: Any, timeout: float = 15.0, what: str = "it") -> Any:
    """Poll ``probe`` until it gives something true (returned), or fail at ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def marked_processes() -> list[psutil.Process]:
    """Live processes started by these tests' calls."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue  # dead, waiting for init to reap it
            if proc.environ().get(MARKER_VAR, "").startswith(MARKER_PREFIX):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def kill_marked(timeout: float = 10.0) -> None:
    """Kill what these tests' calls left running (after a test killed their runner),
    looking again until nothing is left: a process caught mid-exec may not show its
    environment on the first look."""
    deadline = time.monotonic() + timeout
    while left := marked_processes():
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        if time.monotonic() > deadline:
            raise AssertionError(f"could not kill {left}")
        time.sleep(0.02)


def runner_of(home: Path) -> ProcessIdentity:
    """The live runner of ``home``."""
    identity = client.recorded_runner(home)
    assert identity is not None
    return identity


async def unsandboxed(home: Path, **options: Any) -> tuple[Settings, Sandbox]:
    """What start_keeper takes, for a home whose calls run without the sandbox."""

    async def no_settings(session_id: str) -> None:
        return None

    settings = Settings(home=home, sandbox="off", **options)
    return settings, await sandbox_for(settings, no_settings, "test-keeper")


#: Limits for a call run in a limits group.
LIMITS = {"memory_mb": 256, "max_processes": 32, "cpu_seconds": None}


def cgroups_here() -> bool:
    """Whether this process can make cgroups (else the runner falls back to rlimits)."""
    from tether.sandbox import enforcers
    from tether.sandbox.rlimits import Rlimits

    enforcer = enforcers.choose(f"tether-unit-probe-{os.getpid()}")
    enforcer.close()
    return not isinstance(enforcer, Rlimits)
