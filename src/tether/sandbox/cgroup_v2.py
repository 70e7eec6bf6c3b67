"""cgroup v2: one group per call under a delegated subtree of the server's own group."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tether.sandbox.groups import (
    join_by_shell,
    join_procs,
    keyed,
    procs,
    read_int,
    read_text,
    remove_dirs,
    write,
)
from tether.sandbox.limits import MIB, Limits, Mechanism, Usage

_NEEDED = ("memory", "pids")


def own_path(proc_cgroup: str) -> str | None:
    """This process's v2 group path (the ``0::`` line of /proc/self/cgroup)."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def mount_point(mounts: str) -> Path | None:
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


@dataclass
class CgroupV2Group:
    path: Path
    knows_members = True

    def join(self) -> None:
        join_procs([self.path / "cgroup.procs"])

    def join_command(self, argv: Sequence[str]) -> list[str]:
        return join_by_shell([self.path / "cgroup.procs"], argv)

    def attach(self, pid: int) -> None:
        return None

    def read(self) -> Usage:
        usage_us = keyed(self.path / "cpu.stat", "usage_usec")
        current = read_int(self.path / "memory.current")
        processes = read_int(self.path / "pids.current")
        return Usage(
            memory_bytes=current,
            # memory.peak and pids.peak exist on newer kernels only.
            peak_memory_bytes=read_int(self.path / "memory.peak") or current,
            cpu_seconds=None if usage_us is None else usage_us / 1e6,
            processes=read_int(self.path / "pids.peak") or processes,
            processes_refused=(keyed(self.path / "pids.events", "max") or 0) > 0,
            memory_killed=(keyed(self.path / "memory.events", "oom_kill") or 0) > 0,
        )

    def members(self) -> list[int]:
        return procs(self.path / "cgroup.procs")

    def close(self) -> bool:
        return remove_dirs([self.path])


class CgroupV2:
    """Hands out v2 groups under ``parent`` (memory and pids delegated to it)."""

    mechanism: Mechanism = "cgroup2"

    def __init__(self, parent: Path) -> None:
        self._parent = parent
        self.parents = (parent,)

    def create(self, name: str, limits: Limits) -> CgroupV2Group:
        group = CgroupV2Group(self._parent / name)
        group.path.mkdir(exist_ok=True)
        try:
            memory = "max" if limits.memory_mb is None else str(limits.memory_mb * MIB)
            write(group.path / "memory.max", memory)
            with contextlib.suppress(OSError):  # no swap accounting on this machine
                write(group.path / "memory.swap.max", "0")
            pids = "max" if limits.max_processes is None else str(limits.max_processes)
            write(group.path / "pids.max", pids)
        except OSError:
            group.close()
            raise
        return group

    def close(self) -> None:
        remove_dirs([self._parent])


def detect(proc_cgroup: str, mounts: str, tag: str) -> CgroupV2 | None:
    """A v2 enforcer when memory and pids can be delegated below the server's group.

    A group holding processes cannot also give controllers to children ("no internal
    processes"), so this works where the server runs in a delegated group of its own
    with the controllers enabled for its subtree (systemd's Delegate=yes), or at the root.
    """
    own, point = own_path(proc_cgroup), mount_point(mounts)
    if own is None or point is None:
        return None
    base = point / own.lstrip("/")
    available = (read_text(base / "cgroup.controllers") or "").split()
    if not all(c in available for c in _NEEDED):
        return None
    parent = base / tag
    try:
        enabled = (read_text(base / "cgroup.subtree_control") or "").split()
        if not all(c in enabled for c in _NEEDED):
            write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in _NEEDED))
        parent.mkdir(exist_ok=True)
        write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in _NEEDED))
    except OSError:
        return None
    return CgroupV2(parent)
