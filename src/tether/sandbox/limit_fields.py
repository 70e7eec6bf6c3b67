"""A call's limits as settings take them, the server's and a session's alike: the same
bounds in one place (what the kernel's control files take, and floors below which every
call would fail)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tether.sandbox.limits import (
    LEAST_MEMORY_MB,
    LEAST_PROCESSES,
    MOST_CPU_SECONDS,
    MOST_MEMORY_MB,
    MOST_PROCESSES,
)

MemoryMb = Annotated[int, Field(ge=LEAST_MEMORY_MB, le=MOST_MEMORY_MB)]
Processes = Annotated[int, Field(ge=LEAST_PROCESSES, le=MOST_PROCESSES)]
CpuSeconds = Annotated[float, Field(gt=0, le=MOST_CPU_SECONDS, allow_inf_nan=False)]
