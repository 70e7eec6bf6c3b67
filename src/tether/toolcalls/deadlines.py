"""Deadline arithmetic for a tool call (pure; times are monotonic seconds)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from tether.errors import Conflict

DeadlineTarget = Literal["kill", "offload"]


class DeadlineError(Conflict):
    """An extension the call's limits do not allow."""


@dataclass(frozen=True)
class Deadlines:
    """When the call is killed and when it is moved to the background (None: never)."""

    started: float
    kill_at: float | None
    offload_at: float | None
    max_timeout: float | None

    def remaining(self, now: float) -> tuple[float | None, float | None]:
        """Seconds left until (offload, kill), never negative."""
        return _left(self.offload_at, now), _left(self.kill_at, now)

    def next_due(self) -> float | None:
        """The earliest deadline still set."""
        due = [t for t in (self.kill_at, self.offload_at) if t is not None]
        return min(due) if due else None


def on_wall_clock(
    current: Deadlines, mono_now: float, wall_now: float
) -> tuple[float | None, float | None]:
    """(kill_at, offload_at) as epoch seconds: what is stored, so any node can tell."""

    def wall(at: float | None) -> float | None:
        return None if at is None else wall_now + (at - mono_now)

    return wall(current.kill_at), wall(current.offload_at)


def _left(at: float | None, now: float) -> float | None:
    return None if at is None else max(0.0, at - now)


def initial(
    started: float,
    timeout: float | None,
    max_timeout: float | None,
    offload_after: float | None,
) -> Deadlines:
    """Deadlines for a new call: its timeout, capped by the tool's maximum."""
    if timeout is not None and max_timeout is not None:
        timeout = min(timeout, max_timeout)
    if timeout is None and max_timeout is not None:
        timeout = max_timeout
    return Deadlines(
        started=started,
        kill_at=None if timeout is None else started + timeout,
        offload_at=None if offload_after is None else started + offload_after,
        max_timeout=max_timeout,
    )


def extend(
    current: Deadlines, target: DeadlineTarget, seconds: float | None, now: float
) -> Deadlines:
    """Move one deadline ``seconds`` later, or remove it when ``seconds`` is None.

    A deadline already past counts from now. The kill deadline may not pass the tool's
    maximum run time.
    """
    if target == "offload":
        if seconds is None:
            return replace(current, offload_at=None)
        base = max(current.offload_at or now, now)
        return replace(current, offload_at=base + seconds)
    limit = None if current.max_timeout is None else current.started + current.max_timeout
    if seconds is None:
        if limit is not None:
            raise DeadlineError(
                f"this tool cannot run without a deadline; its maximum is {current.max_timeout:g} s"
            )
        return replace(current, kill_at=None)
    base = max(current.kill_at or now, now)
    new_kill = base + seconds
    if limit is not None and new_kill > limit + 1e-6:
        raise DeadlineError(
            f"extending by {seconds:g} s would pass the tool's maximum of "
            f"{current.max_timeout:g} s ({max(0.0, limit - base):.0f} s can still be added)"
        )
    return replace(current, kill_at=new_kill)
