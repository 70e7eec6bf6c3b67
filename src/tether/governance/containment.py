"""How the sandbox changes a decision: escalations become findings, and at ``auto`` a
sandboxed call is judged only on what the sandbox cannot hold (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from tether.governance.findings import Finding, Severity
from tether.governance.levels import ApprovalLevel
from tether.sandbox.policy import Containment


def escalation_findings(contained: Containment | None) -> list[Finding]:
    """What a call asks beyond its session's sandbox, as findings that ask a person at
    ``auto``, ``smart`` and ``strict`` (HIGH) and let it run at ``off``."""
    if contained is None:
        return []
    return [Finding(rule_id, Severity.HIGH, why) for rule_id, why in contained.escalations]


def findings_to_judge(
    level: ApprovalLevel,
    findings: Sequence[Finding],
    escalations: Sequence[Finding],
    contained: Containment | None,
) -> list[Finding]:
    """The findings a level decides on.

    At ``auto`` a call inside the sandbox runs unless a finding is CRITICAL, disguises
    the command from its reader, or it asks to leave the sandbox: the boundary holds what
    the parser only guesses at. Every other level, and every unsandboxed call, is judged
    on all findings as before.
    """
    if level == "auto" and contained is not None and contained.sandboxed:
        kept = [f for f in findings if f.severity is Severity.CRITICAL or _uncontained(f)]
        return [*kept, *escalations]
    return [*findings, *escalations]


# Findings about how a call reads to a person (the built-in text rules: bidi controls,
# invisible or look-alike characters that disguise what runs). The sandbox bounds what a
# command can reach, not what a person believes it does, so these still ask at auto.
_UNCONTAINED_PREFIXES = ("text-",)


def _uncontained(finding: Finding) -> bool:
    return finding.rule_id.startswith(_UNCONTAINED_PREFIXES)
