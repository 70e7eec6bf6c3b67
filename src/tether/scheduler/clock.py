"""Time helpers shared by the cron service: the clock type and epoch conversions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

#: Returns the current time as an aware datetime; tests inject a controllable one.
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


def to_epoch(value: datetime | None) -> float | None:
    """An aware datetime as epoch seconds (how the store keeps time)."""
    return None if value is None else value.timestamp()


def from_epoch(value: float | None) -> datetime | None:
    """Epoch seconds from the store as an aware UTC datetime."""
    return None if value is None else datetime.fromtimestamp(value, UTC)
