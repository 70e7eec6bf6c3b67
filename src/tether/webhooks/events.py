"""The events webhooks can subscribe to, and the callable services report them with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, get_args

EventType = Literal[
    "approval.requested",
    "approval.expired",
    "tool_call.ended",
    "task.finished",
    "cron.run_failed",
]
EVENT_TYPES: Final[tuple[str, ...]] = get_args(EventType)

#: Report an event: returns at once (delivery happens in the background), never raises.
Notify = Callable[[EventType, dict[str, Any]], None]


def ignore(_event: EventType, _data: dict[str, Any]) -> None:
    """A Notify for services built without webhooks (unit tests)."""
