"""Approval level parsing and the allow / ask / deny table."""

from __future__ import annotations

import pytest

from tether.governance.findings import Finding, Severity
from tether.governance.levels import APPROVAL_LEVELS, decide, parse_level


def _findings(*severities: Severity) -> list[Finding]:
    return [Finding(f"r{i}", s, "test") for i, s in enumerate(severities)]


def test_levels_are_the_documented_four() -> None:
    assert APPROVAL_LEVELS == ("off", "auto", "smart", "strict")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("off", "off"), ("AUTO", "auto"), ("Smart", "smart"), (" strict ", "strict")],
)
def test_parse_level_is_case_insensitive(raw: str, expected: str) -> None:
    assert parse_level(raw) == expected


@pytest.mark.parametrize("raw", ["", "on", "paranoid", "autoo"])
def test_parse_level_rejects_unknown_values_listing_valid_ones(raw: str) -> None:
    with pytest.raises(ValueError, match="off, auto, smart, strict"):
        parse_level(raw)


# (worst severity or None) -> verdict per level: off, auto, smart, strict
TABLE = [
    (None, ("allow", "allow", "allow", "ask")),
    (Severity.LOW, ("allow", "allow", "allow", "ask")),
    (Severity.MEDIUM, ("allow", "allow", "ask", "ask")),
    (Severity.HIGH, ("allow", "ask", "ask", "ask")),
    (Severity.CRITICAL, ("deny", "deny", "deny", "deny")),
]


@pytest.mark.parametrize(("severity", "verdicts"), TABLE)
def test_decision_table(severity: Severity | None, verdicts: tuple[str, ...]) -> None:
    findings = _findings(severity) if severity is not None else []
    for level, verdict in zip(APPROVAL_LEVELS, verdicts, strict=True):
        assert decide(level, findings) == verdict, (level, severity)  # type: ignore[arg-type]


def test_worst_finding_wins() -> None:
    mixed = _findings(Severity.LOW, Severity.CRITICAL, Severity.MEDIUM)
    assert decide("off", mixed) == "deny"
    assert decide("auto", _findings(Severity.LOW, Severity.HIGH)) == "ask"


def test_decide_rejects_unknown_level() -> None:
    with pytest.raises(ValueError):
        decide("bogus", [])  # type: ignore[arg-type]
