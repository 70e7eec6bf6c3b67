"""Helpers for the keeper tests (the fixture is in conftest.py)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import psutil

from tether.config import Settings
from tether.keeper import client
from tether.keeper.identity import ProcessIdentity
from tether.sandbox.service import Sandbox
from tether.sandbox.setup import sandbox_for
from tether.toolcalls.launcher import MARKER_VAR

MARKER_PREFIX = f"keeper-test-{os.getpid()}"


def start_fields(call_id: str, command: str, **extra: Any) -> dict[str, Any]:
    """A ``start`` request's fields for ``/bin/sh -c command``, marked as these tests'."""
    return {
        "call_id": call_id,
        "argv": ["/bin/sh", "-c", command],
        "cwd": "/",
        "env": {"PATH": os.environ["PATH"]},
        "marker": f"{MARKER_PREFIX}:{call_id}",
        "grace": 0.5,
        **extra,
    }


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
