"""Remembered decisions: a person's approve or deny, applied to later calls.

A rule is remembered for one session or always (it then survives restarts). It matches
the exact call or, for a plain shell command, the similar pattern shown on the approval
card. A remembered deny applies to any call it matches. A remembered approval applies
only to a call the policy would ask about (so never to a CRITICAL one, which policy
denies first) and only if the call raises no finding the person did not see.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tether.errors import Invalid, NotFound
from tether.governance.context import AnalysisContext
from tether.governance.findings import Finding, Severity
from tether.governance.patterns import (
    exact_key,
    exact_text,
    pattern_text,
    plain_words,
    words_match,
)
from tether.store.records import ApprovalRecord, RememberedRule
from tether.store.remembered import RememberedRepository

Scope = Literal["once", "exact", "similar"]
Remember = Literal["session", "always"]
Action = Literal["approve", "deny"]


class CannotRemember(Invalid):
    """The decision cannot be remembered the way asked; the message says why."""


class RuleNotFound(NotFound):
    """No remembered rule has that id."""

    def __init__(self, rule_id: str) -> None:
        super().__init__("No remembered rule with that id")
        self.rule_id = rule_id


#: How long the copy of the remembered denials is taken as the store's (as the user
#: rules: a node on a shared database applies another's new deny this late).
_DENIALS_FRESH_FOR = 1.0


class DecisionMemory:
    """The remembered rules. For a call that would ask a person they are read from the
    store: every node on a shared database sees a rule kept or revoked on any other at
    once (a copy per process kept using a revoked rule until its restart). Every other
    call is checked against the denials only, from a copy read at most once a second
    (a read per call would cost every call a query for rules that are rare)."""

    def __init__(self, repo: RememberedRepository, ctx: AnalysisContext) -> None:
        self._repo = repo
        self._ctx = ctx
        self._denials: list[RememberedRule] = []
        self._denials_read_at = -_DENIALS_FRESH_FOR

    async def rules(self) -> list[RememberedRule]:
        """Every rule in force, oldest first."""
        return await self._repo.list_all()

    def draft(
        self, record: ApprovalRecord, action: Action, scope: Scope, remember: Remember
    ) -> RememberedRule | None:
        """The rule that would keep a decision on ``record`` for later calls (None for
        ``once``), not yet kept: the decision is taken first, then :meth:`keep` stores it.

        Raises CannotRemember when the call has no similar pattern or a CRITICAL finding.
        """
        if scope == "once":
            return None
        if action == "approve" and any(
            f["severity"] == Severity.CRITICAL.name for f in record.findings
        ):
            raise CannotRemember("a call with a CRITICAL finding cannot be approved in advance")
        match, pattern = self._match_of(record, scope)
        return RememberedRule(
            id=f"rr-{uuid.uuid4().hex[:16]}",
            action=action,
            scope=scope,
            tool_name=record.tool_name,
            match=match,
            pattern=pattern,
            finding_ids=sorted({f["rule_id"] for f in record.findings}),
            session_id=record.session_id if remember == "session" else None,
            request_id=record.request_id,
            created_at=time.time(),
        )

    async def keep(self, rule: RememberedRule) -> None:
        """Store a drafted rule; later calls it matches are decided by it."""
        await self._repo.add(rule)
        self._denials_read_at = -_DENIALS_FRESH_FOR

    @staticmethod
    def _match_of(record: ApprovalRecord, scope: Scope) -> tuple[Any, str]:
        if scope == "exact":
            return exact_key(record.tool_name, record.arguments), exact_text(
                record.tool_name, record.arguments
            )
        if record.similar_pattern is None:
            raise CannotRemember(
                "this call has no similar pattern (only a single plain command has one); "
                "use scope 'exact'"
            )
        return list(record.similar_pattern), pattern_text(record.similar_pattern)

    async def revoke(self, rule_id: str) -> None:
        """Forget a rule. Raises RuleNotFound."""
        if not await self._repo.delete(rule_id):
            raise RuleNotFound(rule_id)
        self._denials_read_at = -_DENIALS_FRESH_FOR

    async def find(
        self,
        session_id: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        findings: Sequence[Finding],
    ) -> RememberedRule | None:
        """The rule that decides this call (a deny before an approval), or None."""
        candidates = self._matching(
            await self._repo.for_call(tool_name, session_id), tool_name, arguments
        )
        for rule in candidates:
            if rule.action == "deny":
                return rule
        seen = {f.rule_id for f in findings}
        if any(f.severity is Severity.CRITICAL for f in findings):
            return None
        for rule in candidates:
            if seen <= set(rule.finding_ids):
                return rule
        return None

    async def denial(
        self, session_id: str, tool_name: str, arguments: Mapping[str, Any]
    ) -> RememberedRule | None:
        """The remembered deny that refuses this call whatever the policy says, or None."""
        now = time.monotonic()
        if now - self._denials_read_at >= _DENIALS_FRESH_FOR:
            self._denials_read_at = now
            self._denials = await self._repo.denials()
        rules = [
            r
            for r in self._denials
            if r.tool_name == tool_name and r.session_id in (None, session_id)
        ]
        return next(iter(self._matching(rules, tool_name, arguments)), None)

    def _matching(
        self, rules: list[RememberedRule], tool_name: str, arguments: Mapping[str, Any]
    ) -> list[RememberedRule]:
        """Those of ``rules`` (all of ``tool_name``) that match the call, in their order."""
        if not rules:
            return []
        key = exact_key(tool_name, arguments)
        # Parsed once for every similar rule, and only if there is one.
        words = (
            plain_words(tool_name, arguments, self._ctx)
            if any(r.scope == "similar" for r in rules)
            else None
        )
        return [
            r
            for r in rules
            if (r.match == key if r.scope == "exact" else words_match(r.match, words))
        ]
