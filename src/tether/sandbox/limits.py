"""What a call may use, what it used, and the words for a limit that ended it (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

# Why a call's process tree was killed; None: it ended on its own.
KilledBy = Literal["memory", "processes", "cpu", "deadline", "cancel"]
# How limits are enforced on this machine, best first.
Mechanism = Literal["cgroup2", "cgroup1", "rlimit"]

MIB = 1024 * 1024

# The largest limits a setting may ask for: what the kernel's control files take (a
# larger figure made every call of a session fail as its group was made).
MOST_MEMORY_MB = 1 << 30  # a petabyte
MOST_PROCESSES = 1 << 22  # the kernel's highest pid_max
MOST_CPU_SECONDS = 10 * 365 * 86_400.0
# The smallest a setting may ask for: below them every call would fail, the shell's own
# start included.
LEAST_MEMORY_MB = 16
LEAST_PROCESSES = 8


@dataclass(frozen=True)
class Limits:
    """Per-call limits; None means no limit of that kind."""

    memory_mb: int | None = 2048
    max_processes: int | None = 512
    cpu_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Limits:
        """Limits sent or stored as :meth:`as_dict` made them (ValueError if not)."""
        return cls(
            memory_mb=_number(data, "memory_mb", int),
            max_processes=_number(data, "max_processes", int),
            cpu_seconds=_number(data, "cpu_seconds", float),
        )


def _number(data: Mapping[str, Any], name: str, kind: type) -> Any:
    """``data[name]``: None or a number of ``kind`` (a float may be given as an int)."""
    value = data.get(name)
    if value is None:
        return None
    accepted = (int, float) if kind is float else (int,)
    if isinstance(value, bool) or not isinstance(value, accepted) or value < 0:
        raise ValueError(f"{name} is {value!r}")
    return kind(value)


@dataclass(frozen=True)
class Usage:
    """One reading of what a call's processes use (None: not measurable here)."""

    memory_bytes: int | None = None
    peak_memory_bytes: int | None = None
    cpu_seconds: float | None = None
    processes: int | None = None
    # Whether the kernel refused a fork or killed a process for a limit since the start.
    processes_refused: bool = False
    memory_killed: bool = False


@dataclass(frozen=True)
class Resources:
    """What a call used over its life: the ``resources`` of its detail."""

    peak_memory_bytes: int | None
    cpu_seconds: float | None
    processes_peak: int | None
    killed_by: KilledBy | None
    # The limits the call ran under (not part of the public figures).
    limits: Limits | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The public figures: peak_memory_bytes, cpu_seconds, processes_peak, killed_by."""
        figures = asdict(self)
        figures.pop("limits")
        return figures

    def as_record(self) -> dict[str, Any]:
        """The figures and the limits, for a file that outlives this process (the
        keeper's status file)."""
        limits = None if self.limits is None else self.limits.as_dict()
        return {**self.as_dict(), "limits": limits}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Resources:
        """Read back :meth:`as_record` (ValueError or TypeError if it is not one)."""
        killed_by = data.get("killed_by")
        if killed_by is not None and killed_by not in get_args(KilledBy):
            raise ValueError(f"killed_by is {killed_by!r}")
        limits = data.get("limits")
        return cls(
            peak_memory_bytes=_number(data, "peak_memory_bytes", int),
            cpu_seconds=_number(data, "cpu_seconds", float),
            processes_peak=_number(data, "processes_peak", int),
            killed_by=killed_by,
            limits=None if limits is None else Limits.from_dict(limits),
        )

    def limit_note(self) -> str | None:
        """What the model is told when a limit ended the call (None: none did)."""
        if self.limits is None or self.killed_by not in ("memory", "processes", "cpu"):
            return None
        return limit_message(self.killed_by, self.limits)


def exceeded(usage: Usage, limits: Limits) -> KilledBy | None:
    """The limit a reading shows was reached, if any.

    Reaching the process limit ends the call: a command whose forks fail (a fork bomb,
    a runaway build) would otherwise spin until its deadline.
    """
    if usage.memory_killed:
        return "memory"
    if usage.processes_refused:
        return "processes"
    cpu = limits.cpu_seconds
    if cpu is not None and usage.cpu_seconds is not None and usage.cpu_seconds >= cpu:
        return "cpu"
    return None


def limit_message(killed_by: KilledBy, limits: Limits) -> str:
    """The plain words the model reads when a limit ended its call."""
    if killed_by == "memory":
        return f"stopped: memory limit {limits.memory_mb} MB reached"
    if killed_by == "processes":
        return f"stopped: process limit {limits.max_processes} reached"
    if killed_by == "cpu":
        return f"stopped: CPU time limit {limits.cpu_seconds:g} s reached"
    return f"stopped: {killed_by}"
