"""cgroup v1: the memory and pids controllers (cpuacct too, when mounted), one directory
per call under the server's own group in each hierarchy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tether.sandbox.groups import (
    join_by_shell,
    join_procs,
    keyed,
    procs,
    read_int,
    remove_dirs,
    write,
)
from tether.sandbox.limits import MIB, Limits, Mechanism, Usage

_UNLIMITED = "-1"


def own_paths(proc_cgroup: str) -> dict[str, str]:
    """Controller -> this process's group path, from /proc/self/cgroup (v1 lines)."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[1]:
            for controller in parts[1].split(","):
                paths[controller] = parts[2]
    return paths


def mount_points(mounts: str) -> dict[str, Path]:
    """Controller -> where its v1 hierarchy is mounted, from /proc/self/mounts."""
    points: dict[str, Path] = {}
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup":
            for option in fields[3].split(","):
                points.setdefault(option, Path(fields[1]))
    return points


@dataclass(frozen=True)
class _Readings:
    """The files a reading reads, as strings: joined once per call, not per reading."""

    memory_usage: str
    memory_peak: str
    oom_control: str
    processes: str
    process_events: str
    cpu_usage: str | None


@dataclass
class CgroupV1Group:
    memory: Path
    pids: Path
    cpuacct: Path | None
    knows_members = True

    def _dirs(self) -> list[Path]:
        return [d for d in (self.memory, self.pids, self.cpuacct) if d is not None]

    def join(self) -> None:
        join_procs([d / "cgroup.procs" for d in self._dirs()])

    def join_command(self, argv: Sequence[str]) -> list[str]:
        # ``tasks``, not ``cgroup.procs``: see join_by_shell.
        return join_by_shell([d / "tasks" for d in self._dirs()], argv)

    def attach(self, pid: int) -> None:
        return None

    def read(self) -> Usage:
        files = self._files
        usage_ns = read_int(files.cpu_usage) if files.cpu_usage else None
        return Usage(
            memory_bytes=read_int(files.memory_usage),
            peak_memory_bytes=read_int(files.memory_peak),
            cpu_seconds=None if usage_ns is None else usage_ns / 1e9,
            processes=read_int(files.processes),
            processes_refused=(keyed(files.process_events, "max") or 0) > 0,
            memory_killed=(keyed(files.oom_control, "oom_kill") or 0) > 0,
        )

    @cached_property
    def _files(self) -> _Readings:
        return _Readings(
            memory_usage=str(self.memory / "memory.usage_in_bytes"),
            memory_peak=str(self.memory / "memory.max_usage_in_bytes"),
            oom_control=str(self.memory / "memory.oom_control"),
            processes=str(self.pids / "pids.current"),
            process_events=str(self.pids / "pids.events"),
            cpu_usage=str(self.cpuacct / "cpuacct.usage") if self.cpuacct else None,
        )

    def members(self) -> list[int]:
        return sorted(
            set(procs(self.pids / "cgroup.procs")) | set(procs(self.memory / "cgroup.procs"))
        )

    def close(self) -> bool:
        return remove_dirs(self._dirs())


class CgroupV1:
    """Hands out v1 groups under ``parents`` (controller -> the server's tether dir)."""

    mechanism: Mechanism = "cgroup1"

    def __init__(self, parents: dict[str, Path]) -> None:
        self._parents = parents
        self.parents = tuple(parents.values())

    def create(self, name: str, limits: Limits) -> CgroupV1Group:
        dirs = {c: p / name for c, p in self._parents.items()}
        for directory in dirs.values():
            directory.mkdir(parents=True, exist_ok=True)
        group = CgroupV1Group(dirs["memory"], dirs["pids"], dirs.get("cpuacct"))
        try:
            _apply(group, limits)
        except OSError:
            group.close()
            raise
        return group

    def close(self) -> None:
        remove_dirs(list(self.parents))


def _apply(group: CgroupV1Group, limits: Limits) -> None:
    memory = _UNLIMITED if limits.memory_mb is None else str(limits.memory_mb * MIB)
    write(group.memory / "memory.limit_in_bytes", memory)
    swap = group.memory / "memory.memsw.limit_in_bytes"
    if swap.exists():
        # Memory plus swap at the same figure: swap must not stretch the limit.
        write(swap, memory)
    pids = "max" if limits.max_processes is None else str(limits.max_processes)
    write(group.pids / "pids.max", pids)


def detect(proc_cgroup: str, mounts: str, tag: str) -> CgroupV1 | None:
    """A v1 enforcer when memory and pids hierarchies are mounted and writable here."""
    own, points = own_paths(proc_cgroup), mount_points(mounts)
    parents: dict[str, Path] = {}
    for controller in ("memory", "pids", "cpuacct"):
        if controller not in own or controller not in points:
            continue
        parent = points[controller] / own[controller].lstrip("/") / tag
        try:
            parent.mkdir(exist_ok=True)
        except OSError:
            continue
        parents[controller] = parent
    if "memory" not in parents or "pids" not in parents:
        return None
    return CgroupV1(parents)
