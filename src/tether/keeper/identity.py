"""A process named by pid AND start time: a pid alone may since belong to another."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import psutil

# psutil derives start times from boot time plus clock ticks: equal for one process
# read twice, but compare with a little room for float rounding.
_SAME_START = 0.05


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as it was when recorded."""

    pid: int
    create_time: float

    def is_alive(self) -> bool:
        """Whether this very process (not a later one with the same pid) still runs."""
        try:
            proc = psutil.Process(self.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            return abs(proc.create_time() - self.create_time) < _SAME_START
        except psutil.Error:
            return False


def identify(pid: int) -> ProcessIdentity:
    """The identity of the live process ``pid`` (raises psutil.NoSuchProcess if gone).

    Read from /proc/<pid>/stat as psutil reads it (boot time plus the start in clock
    ticks), without a psutil.Process: that reads more files, and the runner names every
    call it starts this way (10% of its time in a burst of starts)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 4096)  # one line of a few hundred bytes
        finally:
            os.close(fd)
    except OSError as exc:
        raise psutil.NoSuchProcess(pid) from exc
    # Fields after the command name, which is in parentheses and may hold anything;
    # the start time is the 22nd field, the 20th after the name.
    ticks = int(data[data.rindex(b")") + 2 :].split()[19])
    return ProcessIdentity(pid, ticks / _TICKS + _boot_time())


_TICKS = os.sysconf("SC_CLK_TCK")


@functools.cache
def _boot_time() -> float:
    return float(psutil.boot_time())
