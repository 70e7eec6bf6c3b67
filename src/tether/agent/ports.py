"""The small interfaces the agent uses to reach governance and report progress."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from tether.toolcalls.call import AdmissionPlan, Invocation

WhenUnattended = Literal["deny", "wait"]
WHEN_UNATTENDED: tuple[WhenUnattended, ...] = ("deny", "wait")


@dataclass(frozen=True)
class Attendance:
    """Whether a person follows the turn, and what to do when a call needs one and none does.

    ``deny`` refuses such a call at once (the model is told why); ``wait`` waits for an
    answer as usual (someone may open the console) until the approval times out.
    """

    attended: bool = True
    when_unattended: WhenUnattended = "wait"


ATTENDED = Attendance()


class TurnEvents(Protocol):
    """Where a turn reports what happens, as JSON-ready dicts with a ``type`` key."""

    def emit(self, event: dict[str, Any]) -> None: ...


class Gate(Protocol):
    """Decides whether a tool call may run.

    ``events`` is the turn's event sink, so a request for approval shows on its stream.
    """

    async def plan_admission(
        self,
        inv: Invocation,
        level: str,
        events: TurnEvents,
        attendance: Attendance = ATTENDED,
    ) -> AdmissionPlan: ...

    async def refused(self, inv: Invocation, level: str, cause: str, reason: str) -> None:
        """Record a call refused before review (unknown tool, bad arguments, capacity)."""
