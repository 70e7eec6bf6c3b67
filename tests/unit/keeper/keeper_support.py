"""Helpers for the keeper tests (the fixture is in conftest.py)."""

from __future__ import annotations

import os
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
            if proc.environ().get(MARKER_VAR, "").startswith(MARKER_PREFIX):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def runner_of(home: Path) -> ProcessIdentity:
    """The live runner of ``home``."""
    identity = client.recorded_runner(home)
    assert identity is not None
    return identity
