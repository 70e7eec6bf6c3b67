"""Helpers for the keeper tests (the fixture is in conftest.py)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psutil

from tether.keeper import client
from tether.keeper.identity import ProcessIdentity
from tether.toolcalls.launcher import MARKER_VAR

MARKER_PREFIX = f"keeper-test-{os.getpid()}"


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
