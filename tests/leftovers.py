"""Processes the tests started and left running, found and killed when the run ends.

Every test reaps what it starts; this is the net under that rule, for the case where a
test could not (one stopped by its timeout while a teardown hung, say) and for any that
forgot. The run marks its own environment, which every server, runner, call tree and
fixture process it starts inherits (unless a test clears the environment on purpose),
and at the end every process still carrying the mark is named and killed: a CI machine,
and a developer's, is left with nothing of the run.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import psutil

MARK = "PYTEST_TETHER_RUN"


def mark_this_run() -> None:
    """Mark the environment the run's processes will inherit (a run inside another's
    marks its own, so that it kills only what it started)."""
    os.environ[MARK] = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _marked() -> list[psutil.Process]:
    mark = os.environ.get(MARK)
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(MARK) == mark:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def kill_left_behind(rounds: int = 5) -> list[str]:
    """SIGKILL every process of this run still alive (again, for what they fork while
    being killed); returns a line per process found, for the report."""
    if MARK not in os.environ:
        return []
    seen: dict[int, str] = {}
    for _ in range(rounds):
        alive = _marked()
        if not alive:
            break
        for proc in alive:
            try:
                seen.setdefault(proc.pid, " ".join(proc.cmdline())[:200] or proc.name())
                proc.send_signal(signal.SIGKILL)
            except psutil.Error:
                continue
        psutil.wait_procs(alive, timeout=2.0)
        time.sleep(0.05)
    return [f"pid {pid}: {command}" for pid, command in sorted(seen.items())]
