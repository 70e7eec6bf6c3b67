"""The last resort: per-process rlimits, and usage sampled from the process group.

Weaker than a cgroup: memory is capped per process as address space, CPU time per
process, the process count per user; what a call used is what sampling saw.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
from collections.abc import Sequence
from dataclasses import dataclass, field

import psutil

from tether.sandbox.limits import MIB, Limits, Mechanism, Usage


def _sample(pgid: int) -> tuple[int, float, int]:
    """(resident bytes, CPU seconds, process count) of a process group's live members."""
    rss, cpu, count = 0, 0.0, 0
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) != pgid:
                continue
            with proc.oneshot():
                times = proc.cpu_times()
                rss += proc.memory_info().rss
            cpu += times.user + times.system + times.children_user + times.children_system
            count += 1
    return rss, cpu, count


@dataclass
class RlimitGroup:
    limits: Limits
    user_processes: int
    pgid: int | None = None
    _peak_rss: int = 0
    _peak_count: int = 0
    _cpu: float = 0.0
    _members: list[int] = field(default_factory=list)
    knows_members = False

    def join(self) -> None:
        if self.limits.memory_mb is not None:
            size = self.limits.memory_mb * MIB
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        if self.limits.cpu_seconds is not None:
            soft = math.ceil(self.limits.cpu_seconds)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
        if self.limits.max_processes is not None and os.geteuid() != 0:
            # RLIMIT_NPROC counts all of the user's processes, so allow for those
            # already running (root is not held to it at all).
            total = self.user_processes + self.limits.max_processes
            resource.setrlimit(resource.RLIMIT_NPROC, (total, total))

    def join_command(self, argv: Sequence[str]) -> None:
        return None  # set in the child by join()

    def attach(self, pid: int) -> None:
        self.pgid = pid

    def read(self) -> Usage:
        if self.pgid is None:
            return Usage()
        rss, cpu, count = _sample(self.pgid)
        self._peak_rss = max(self._peak_rss, rss)
        self._peak_count = max(self._peak_count, count)
        self._cpu = max(self._cpu, cpu)
        return Usage(
            memory_bytes=rss,
            peak_memory_bytes=self._peak_rss,
            cpu_seconds=self._cpu,
            processes=self._peak_count,
        )

    def members(self) -> list[int]:
        return []

    def close(self) -> bool:
        return True


class Rlimits:
    """Hands out rlimit groups (nothing to create on the system)."""

    mechanism: Mechanism = "rlimit"

    def create(self, name: str, limits: Limits) -> RlimitGroup:
        uid = os.geteuid()
        mine = sum(
            1
            for p in psutil.process_iter(["uids"])
            if p.info["uids"] and p.info["uids"].real == uid
        )
        return RlimitGroup(limits, mine)

    def close(self) -> None:
        return None
