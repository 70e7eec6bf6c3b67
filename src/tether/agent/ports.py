"""The small interfaces the agent uses to reach governance and report progress."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from tether.toolcalls.coordinator import Admission
from tether.toolcalls.live import Invocation


@dataclass(frozen=True)
class Review:
    """Governance's answer for one call.

    ``allow`` runs it, ``deny`` refuses it with ``reason``, ``ask`` waits on ``admission``
    (a person's decision) before it may run.
    """

    verdict: Literal["allow", "ask", "deny"]
    reason: str = ""
    admission: Callable[[], Awaitable[Admission]] | None = None


class TurnEvents(Protocol):
    """Where a turn reports what happens, as JSON-ready dicts with a ``type`` key."""

    def emit(self, event: dict[str, Any]) -> None: ...


class Gate(Protocol):
    """Decides whether a tool call may run.

    ``events`` is the turn's event sink, so a request for approval shows on its stream.
    """

    async def review(self, inv: Invocation, level: str, events: TurnEvents) -> Review: ...
