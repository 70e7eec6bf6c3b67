"""A process named by pid AND start time: a pid alone may since belong to another."""

from __future__ import annotations

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
    """The identity of the live process ``pid`` (raises psutil.NoSuchProcess if gone)."""
    return ProcessIdentity(pid, psutil.Process(pid).create_time())
