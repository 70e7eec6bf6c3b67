"""The small interfaces the agent uses to reach governance and report progress."""

from __future__ import annotations

from typing import Any, Protocol

from tether.toolcalls.call import AdmissionPlan, Invocation


class TurnEvents(Protocol):
    """Where a turn reports what happens, as JSON-ready dicts with a ``type`` key."""

    def emit(self, event: dict[str, Any]) -> None: ...


class Gate(Protocol):
    """Decides whether a tool call may run.

    ``events`` is the turn's event sink, so a request for approval shows on its stream.
    """

    async def plan_admission(
        self, inv: Invocation, level: str, events: TurnEvents
    ) -> AdmissionPlan: ...
