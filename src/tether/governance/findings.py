"""Severity levels and findings produced by the governance analysers."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Severity(enum.IntEnum):
    """How dangerous a finding is; ordered so that ``max()`` gives the worst."""

    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4

    @classmethod
    def parse(cls, value: object) -> Severity:
        """Accept a Severity or its name (case-insensitive); raise ValueError otherwise."""
        if isinstance(value, Severity):
            return value
        # Plain ints are rejected on purpose: rule files must say what they mean.
        if isinstance(value, str) and value.strip().upper() in cls.__members__:
            return cls[value.strip().upper()]
        names = ", ".join(cls.__members__)
        raise ValueError(f"severity must be one of {names}, got {value!r}")


@dataclass(frozen=True)
class Finding:
    """One reason a tool call looks risky."""

    rule_id: str
    severity: Severity
    description: str


def worst(findings: Iterable[Finding]) -> Severity | None:
    """Highest severity among ``findings``, or None if there are none."""
    return max((f.severity for f in findings), default=None)
