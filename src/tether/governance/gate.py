"""The agent's Gate: analyse a call, decide by level, ask a person when needed, audit it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from tether import model_texts
from tether.agent.ports import ATTENDED, Attendance, TurnEvents
from tether.governance.analyzer import Analyzer
from tether.governance.approvals import (
    CANCELLED_WHILE_AWAITING,
    DECIDED_ELSEWHERE,
    RESTARTED,
    ApprovalService,
    LeftBehind,
    approval_view,
    findings_data,
)
from tether.governance.containment import escalation_findings, findings_to_judge
from tether.governance.context import AnalysisContext
from tether.governance.findings import Finding, Severity
from tether.governance.levels import ApprovalLevel, decide, parse_level
from tether.governance.memory import DecisionMemory
from tether.governance.patterns import exact_text, similar_words
from tether.sandbox.policy import Containment
from tether.store.governance import GovernanceRepository
from tether.store.records import ApprovalRecord, AuditEntry, RememberedRule
from tether.toolcalls.call import Admission, AdmissionMode, AdmissionPlan, Invocation
from tether.webhooks.events import Notify, ignore

log = logging.getLogger(__name__)

ANALYSIS_FAILED = "governance.analysis-failed"


@dataclass(frozen=True)
class _Decision:
    inv: Invocation
    level: str
    findings: Sequence[Finding]
    mode: AdmissionMode
    contained: Containment | None = None


def rule_denial(findings: Sequence[Finding]) -> str:
    """What the model is told when a rule refuses a call outright."""
    worst = max(findings, key=lambda f: f.severity)
    return model_texts.refused_by_rule(worst.rule_id, worst.description)


def answer_denial(answer: Admission) -> str:
    """What the model is told when a request for approval ends in a refusal."""
    if answer.by_human:
        return model_texts.refused_by_person(answer.reason)
    return model_texts.approval_not_given(answer.reason)


def unattended_denial(inv: Invocation, findings: Sequence[Finding]) -> str:
    """What the model is told when a call needs a person and none attends the run."""
    why = (
        "; ".join(f"rule {f.rule_id!r}: {f.description}" for f in findings)
        or "the approval level asks a person for every call"
    )
    return model_texts.refused_unattended(exact_text(inv.tool_name, inv.arguments), why)


def remembered_denial(rule: RememberedRule, reason: str | None) -> str:
    """What the model is told when a remembered deny refuses a call (with the reason the
    person gave when denying it, if any)."""
    return model_texts.refused_by_remembered_rule(rule.pattern, reason or "")


#: Calls whose arguments hold more text than this are analysed in a worker thread: a
#: long script takes up to a few hundred milliseconds to parse and walk, which every
#: other request would wait out on the event loop. Short ones (nearly all) stay inline.
ANALYSE_INLINE_CHARS = 4096


def _argument_chars(arguments: Mapping[str, object]) -> int:
    return sum(len(v) for v in arguments.values() if isinstance(v, str))


class GovernanceGate:
    """Implements the agent's Gate with the analyser, the approval service and the audit."""

    def __init__(
        self,
        analyzer: Analyzer,
        context: AnalysisContext,
        approvals: ApprovalService,
        repo: GovernanceRepository,
        *,
        memory: DecisionMemory | None = None,
        notify: Notify = ignore,
        containment: Callable[[Invocation], Awaitable[Containment | None]] | None = None,
        rules_fresh: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._analyzer = analyzer
        # Brings the user rules up to date with the store (another node's edits).
        self._rules_fresh = rules_fresh
        self._context = context
        self._approvals = approvals
        self._repo = repo
        self._memory = memory
        self._notify = notify
        # How a call would run in the sandbox (None: no sandbox in this server).
        self._containment = containment

    async def plan_admission(
        self,
        inv: Invocation,
        level: str,
        events: TurnEvents,
        attendance: Attendance = ATTENDED,
    ) -> AdmissionPlan:
        """allow, deny (with the text the model sees) or ask (a person decides)."""
        if self._rules_fresh is not None:
            await self._rules_fresh()
        if _argument_chars(inv.arguments) <= ANALYSE_INLINE_CHARS:
            parsed, findings = self._analyse(inv, level)
        else:
            parsed, findings = await asyncio.to_thread(self._analyse, inv, level)
        contained = await self._containment(inv) if self._containment else None
        escalations = escalation_findings(contained)
        mode: AdmissionMode = "deny"
        if parsed is not None:
            mode = decide(parsed, findings_to_judge(parsed, findings, escalations, contained))
        decision = _Decision(inv, parsed or level, [*findings, *escalations], mode, contained)
        if mode == "allow":
            # A remembered deny refuses any call it matches, one the policy lets through
            # included (the level may have been lowered since the person denied it).
            denial = (
                await self._memory.denial(inv.session_id, inv.tool_name, inv.arguments)
                if self._memory
                else None
            )
            if denial is not None:
                return await self._remembered_deny(decision, denial)
            await self._audit(decision, "allowed", "policy", None)
            return AdmissionPlan("allow", judged=contained)
        if mode == "deny":
            reason = rule_denial(findings)
            await self._audit(decision, "denied", "policy", reason)
            return AdmissionPlan("deny", reason)
        plan = await self._plan_ask(decision, events, attendance)
        return replace(plan, judged=contained)

    async def _plan_ask(
        self, decision: _Decision, events: TurnEvents, attendance: Attendance
    ) -> AdmissionPlan:
        inv = decision.inv
        rule = (
            await self._memory.find(inv.session_id, inv.tool_name, inv.arguments, decision.findings)
            if self._memory
            else None
        )
        if rule is not None and rule.action == "deny":
            return await self._remembered_deny(decision, rule)
        if rule is not None:
            await self._audit(decision, "allowed", "remembered", rule.pattern, rule_id=rule.id)
            return AdmissionPlan("ask", ask=_remembered_approval)
        if not attendance.attended and attendance.when_unattended == "deny":
            reason = unattended_denial(inv, decision.findings)
            await self._audit(decision, "denied", "unattended", reason)
            return AdmissionPlan("deny", reason)

        async def ask() -> Admission:
            return await self._ask(decision, events)

        return AdmissionPlan("ask", ask=ask)

    async def _remembered_deny(self, decision: _Decision, rule: RememberedRule) -> AdmissionPlan:
        denied = await self._repo.get_approval(rule.request_id) if rule.request_id else None
        reason = remembered_denial(rule, denied.reason if denied is not None else None)
        await self._audit(decision, "denied", "remembered", reason, rule_id=rule.id)
        return AdmissionPlan("deny", reason)

    async def refused(self, inv: Invocation, level: str, cause: str, reason: str) -> None:
        """Audit a call refused before review: unknown tool, bad arguments, capacity."""
        decision = _Decision(inv, level, [], "deny")
        await self._audit(decision, "denied", cause, reason)

    def _analyse(self, inv: Invocation, level: str) -> tuple[ApprovalLevel | None, list[Finding]]:
        # Fail closed: a level or an analysis we cannot trust refuses the call.
        try:
            parsed = parse_level(level)
            findings = self._analyzer.analyze_tool_call(inv.tool_name, inv.arguments, self._context)
        except Exception as exc:
            log.exception("governance analysis of %s failed", inv.call_id)
            failure = Finding(ANALYSIS_FAILED, Severity.CRITICAL, f"analysis failed ({exc})")
            return None, [failure]
        return parsed, findings

    async def _ask(self, decision: _Decision, events: TurnEvents) -> Admission:
        inv = decision.inv
        similar = similar_words(inv.tool_name, inv.arguments, self._context)
        record = await self._approvals.open(inv, decision.level, decision.findings, similar)
        view = approval_view(record)
        events.emit({"type": "approval_requested", "approval": view})
        self._notify("approval.requested", view)

        async def audit_cancel() -> None:
            await self._audit(decision, "denied", "cancel", CANCELLED_WHILE_AWAITING, record)

        answer = await self._approvals.wait(record.request_id, on_cancelled=audit_cancel)
        events.emit(
            {
                "type": "approval_resolved",
                "request_id": record.request_id,
                "tool_call_id": record.tool_call_id,
                "approved": answer.allowed,
                "decided_by": answer.decided_by,
            }
        )
        if answer.decided_by == "timeout":
            self._notify("approval.expired", approval_view(record))
        if answer is DECIDED_ELSEWHERE:  # audited by the node that decided it
            return Admission(False, answer_denial(answer), answer.decided_by)
        if answer.allowed:
            await self._audit(decision, "allowed", answer.decided_by, answer.reason or None, record)
            return answer
        text = answer_denial(answer)
        await self._audit(decision, "denied", answer.decided_by, text, record)
        return Admission(False, text, answer.decided_by)

    async def deny_leftovers(
        self, why: LeftBehind = RESTARTED, owners: Collection[str] | None = None
    ) -> int:
        """Deny (and audit) approvals a server that is gone left pending: at start-up,
        or when a node is lost (``why``; only what its ``owners`` left)."""
        leftovers = await self._approvals.deny_leftovers(why, owners)
        for record in leftovers:
            await self._write_audit(_left_behind_entry(record, why))
        return len(leftovers)

    async def _audit(
        self,
        decision: _Decision,
        outcome: str,
        decided_by: str,
        reason: str | None,
        record: ApprovalRecord | None = None,
        rule_id: str | None = None,
    ) -> None:
        inv = decision.inv
        entry = AuditEntry(
            session_id=inv.session_id,
            tool_call_id=inv.call_id,
            tool_name=inv.tool_name,
            arguments=inv.arguments,
            level=decision.level,
            findings=findings_data(decision.findings),
            verdict=decision.mode,
            outcome=outcome,
            decided_by=decided_by,
            reason=reason,
            request_id=record.request_id if record else None,
            rule_id=rule_id,
            sandbox=decision.contained.as_dict() if decision.contained else None,
        )
        await self._write_audit(entry)

    async def _write_audit(self, entry: AuditEntry) -> None:
        # Values go in as arguments: the log formatter neutralises CR/LF inside them.
        log.info(
            "governance decision session=%s call=%s tool=%s level=%s verdict=%s outcome=%s "
            "by=%s rules=%s",
            entry.session_id,
            entry.tool_call_id,
            entry.tool_name,
            entry.level,
            entry.verdict,
            entry.outcome,
            entry.decided_by,
            ",".join(f["rule_id"] for f in entry.findings) or "-",
        )
        await self._repo.add_audit(entry)


async def _remembered_approval() -> Admission:
    # A person approved calls like this one before: it runs as if approved now.
    return Admission(True, decided_by="remembered")


def _left_behind_entry(record: ApprovalRecord, why: LeftBehind) -> AuditEntry:
    return AuditEntry(
        session_id=record.session_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        arguments=record.arguments,
        level=record.level,
        findings=record.findings,
        verdict="ask",
        outcome="denied",
        decided_by=why.decided_by,
        reason=why.audit,
        request_id=record.request_id,
        rule_id=None,
        sandbox=None,
    )
