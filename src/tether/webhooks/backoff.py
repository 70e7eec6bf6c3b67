"""When a failed delivery is tried again: exponential back-off, and when to give up."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """The defaults retry after 5, 10, 20 s (three within the first minute), then twice
    as long each time up to 6 h between tries, for up to a day."""

    first_delay: float = 5.0
    factor: float = 2.0
    max_delay: float = 6 * 3600.0
    give_up_after: float = 24 * 3600.0
    timeout: float = 10.0

    def delay(self, attempts: int) -> float:
        """Seconds to wait after the ``attempts``-th failure (1-based)."""
        exponent = max(0, attempts - 1)
        # Capped before the power overflows a float for a long-failing receiver.
        if exponent > 64:
            return self.max_delay
        return min(self.first_delay * self.factor**exponent, self.max_delay)

    def next_attempt(self, created_at: float, now: float, attempts: int) -> float | None:
        """When to try again after a failure, or None once the delivery is too old."""
        due = now + self.delay(attempts)
        return due if due - created_at <= self.give_up_after else None
