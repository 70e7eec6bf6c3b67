"""A tool call's states and the moves allowed between them (pure)."""

from __future__ import annotations

from typing import Literal

from tether.errors import Conflict

Status = Literal["awaiting_approval", "running", "offloaded", "completed"]
EndState = Literal["success", "error", "cancelled", "timeout", "denied"]

_ALLOWED: dict[str, frozenset[str]] = {
    "awaiting_approval": frozenset({"running", "completed"}),
    "running": frozenset({"offloaded", "completed"}),
    "offloaded": frozenset({"completed"}),
    "completed": frozenset(),
}


class TransitionError(Conflict):
    """A move the state machine does not allow (for example offloading a finished call)."""


def check_transition(current: Status, target: Status) -> None:
    """Raise ``TransitionError`` unless ``current -> target`` is allowed."""
    if target not in _ALLOWED[current]:
        raise TransitionError(f"cannot move a tool call from {current!r} to {target!r}")


def is_active(status: Status) -> bool:
    """Whether the call's tool is (or may still be) doing work."""
    return status in ("running", "offloaded")


def counts_down(status: Status) -> bool:
    """Whether the call's deadlines are shown: until it has ended (one awaiting approval
    is held to them too)."""
    return status != "completed"
