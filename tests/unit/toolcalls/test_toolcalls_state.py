"""The tool-call state machine."""

from __future__ import annotations

import pytest

from tether.toolcalls.state import TransitionError, check_transition, is_active

ALLOWED = [
    ("awaiting_approval", "running"),
    ("awaiting_approval", "completed"),
    ("running", "offloaded"),
    ("running", "completed"),
    ("offloaded", "completed"),
]
REFUSED = [
    ("running", "awaiting_approval"),
    ("running", "running"),
    ("offloaded", "running"),
    ("offloaded", "offloaded"),
    ("awaiting_approval", "offloaded"),
    ("completed", "running"),
    ("completed", "offloaded"),
    ("completed", "completed"),
]


@pytest.mark.parametrize(("current", "target"), ALLOWED)
def test_allowed_moves(current: str, target: str) -> None:
    check_transition(current, target)  # type: ignore[arg-type]


@pytest.mark.parametrize(("current", "target"), REFUSED)
def test_refused_moves_name_both_states(current: str, target: str) -> None:
    with pytest.raises(TransitionError, match=f"{current!r} to {target!r}"):
        check_transition(current, target)  # type: ignore[arg-type]


def test_active_states() -> None:
    assert is_active("running") and is_active("offloaded")
    assert not is_active("awaiting_approval") and not is_active("completed")
