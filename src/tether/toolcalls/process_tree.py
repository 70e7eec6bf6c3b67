"""Find and signal every process a tool call started.

A call's processes are found three ways, since each alone can miss some: the members of
its process group, the descendants of its root process, and any process carrying the
call's marker in its environment (a child that called setsid and was orphaned is still
found that way).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil

from tether.tools.base import MARKER_VAR


def find_tree(root_pid: int | None, pgid: int | None, marker: str | None) -> list[psutil.Process]:
    """Every live process that belongs to the call, the server itself excluded."""
    found: dict[int, psutil.Process] = {}
    me = os.getpid()
    if root_pid is not None:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(root_pid)
            found[root.pid] = root
            for child in root.children(recursive=True):
                found[child.pid] = child
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in found or proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if pgid is not None and os.getpgid(proc.pid) == pgid:
                found[proc.pid] = proc
                continue
            if marker is not None and proc.environ().get(MARKER_VAR) == marker:
                found[proc.pid] = proc
    found.pop(me, None)
    return list(found.values())


def signal_all(procs: list[psutil.Process], sig: signal.Signals) -> None:
    """Send ``sig`` to each process, ignoring ones already gone."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def terminate(
    root_pid: int | None, pgid: int | None, marker: str | None, grace: float, force: bool
) -> None:
    """Stop the whole tree: SIGTERM, then SIGKILL for survivors after ``grace`` seconds.

    Blocking (it waits for processes to exit): call it from a worker thread.
    """
    procs = find_tree(root_pid, pgid, marker)
    if not procs:
        return
    if force:
        signal_all(procs, signal.SIGKILL)
        psutil.wait_procs(procs, timeout=1.0)
        return
    signal_all(procs, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace)
    # Look again: a process may have forked while being told to stop.
    survivors = {p.pid: p for p in alive}
    survivors.update({p.pid: p for p in find_tree(root_pid, pgid, marker)})
    if survivors:
        signal_all(list(survivors.values()), signal.SIGKILL)
        psutil.wait_procs(list(survivors.values()), timeout=1.0)


def reap_groups(pgids: list[int], marker_prefix: str | None = None) -> int:
    """Kill process groups (and marked processes) a crashed server left behind."""
    killed = 0
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
            killed += 1
    if marker_prefix is not None:
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error, OSError):
                if proc.environ().get(MARKER_VAR, "").startswith(marker_prefix):
                    proc.kill()
                    killed += 1
    if killed:
        time.sleep(0.05)
    return killed
