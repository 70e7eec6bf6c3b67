"""Approval levels and the allow / ask / deny decision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast, get_args

from tether.governance.findings import Finding, Severity, worst
from tether.toolcalls.call import AdmissionMode

ApprovalLevel = Literal["off", "auto", "smart", "strict"]
APPROVAL_LEVELS: tuple[str, ...] = get_args(ApprovalLevel)

# Lowest severity that makes a level ask a human; None means "never asks".
# strict is handled separately because it asks even with no findings at all.
_ASK_THRESHOLD: dict[str, Severity | None] = {
    "off": None,
    "auto": Severity.HIGH,
    "smart": Severity.MEDIUM,
}


def parse_level(value: str) -> ApprovalLevel:
    """Normalise a user-supplied approval level (case-insensitive, surrounding blanks ignored).

    Raises ValueError naming the valid levels when ``value`` is not one of them.
    """
    normalised = value.strip().lower() if isinstance(value, str) else value
    if normalised not in APPROVAL_LEVELS:
        valid = ", ".join(APPROVAL_LEVELS)
        raise ValueError(f"invalid approval level {value!r}; expected one of: {valid}")
    return cast(ApprovalLevel, normalised)


def decide(level: ApprovalLevel, findings: Sequence[Finding]) -> AdmissionMode:
    """How a call is admitted at the given approval level, from its analysis findings.

    CRITICAL findings are denied at every level, ``off`` included: they describe
    actions no human approval should be able to wave through by accident.
    """
    top = worst(findings)
    if top is Severity.CRITICAL:
        return "deny"
    if level == "strict":
        return "ask"
    if level not in _ASK_THRESHOLD:
        # Defensive: an unknown level must not silently weaken governance.
        raise ValueError(f"invalid approval level {level!r}")
    threshold = _ASK_THRESHOLD[level]
    if threshold is not None and top is not None and top >= threshold:
        return "ask"
    return "allow"
