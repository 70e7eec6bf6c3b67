"""Approval requests: a call that needs a person waits here until approved, denied,
expired or cancelled. Every request and its decision is persisted, so a restart can
deny what was left pending (fail closed)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.elsewhere import Elsewhere, unreachable
from tether.errors import Conflict, Forbidden, NotFound, OutOfStorage
from tether.governance.findings import Finding, Severity
from tether.governance.memory import Action, DecisionMemory, Remember, Scope
from tether.governance.patterns import exact_text, pattern_text
from tether.store.governance import GovernanceRepository
from tether.store.records import ApprovalRecord, RememberedRule
from tether.toolcalls.call import Admission, Invocation
from tether.waits import within

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeftBehind:
    """Why requests were left pending with nobody to answer for them, as recorded on
    each request (``decided_by``, ``reason``) and said in the audit trail (``audit``)."""

    decided_by: str
    reason: str
    audit: str


#: The server that asked stopped (found at the next start).
RESTARTED = LeftBehind(
    "restart", "server restarted", "the server restarted while the call awaited approval"
)
#: The node that asked was declared dead by another (see tether/node_loss.py).
NODE_LOST = LeftBehind(
    "node_lost", "node lost", "the node running the call was lost while it awaited approval"
)
#: Tether runs one agent; QwenPaw's payloads name it.
DEFAULT_AGENT_ID = "default"


class ApprovalNotFound(NotFound):
    """No pending request has that id."""

    def __init__(self, request_id: str) -> None:
        # QwenPaw's wording, which shows only the head of the id.
        super().__init__(f"Approval request not found: {request_id[:16]}")


class ApprovalDecided(Conflict):
    """The request was already settled (by a person, expiry or cancellation)."""

    def __init__(self) -> None:
        super().__init__("Approval request already resolved or expired")


class ApprovalForbidden(Forbidden):
    """The request belongs to another session."""

    def __init__(self) -> None:
        super().__init__("Root session mismatch: cannot approve other session trees")


@dataclass
class _Pending:
    record: ApprovalRecord
    answer: asyncio.Future[Admission] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    # Set by whoever settles the request first, so a person's answer, expiry and
    # cancellation can never both settle it; a person's answer the store refused (a
    # full disk: a 507, nothing kept) sets it back, the request pending again.
    decided: bool = False
    # Held from the check of ``decided`` to the decision stored (or refused).
    deciding: asyncio.Lock = field(default_factory=asyncio.Lock)


def findings_data(findings: Sequence[Finding]) -> list[dict[str, str]]:
    """Findings as JSON-ready dicts (the API and the store use this shape)."""
    return [
        {"rule_id": f.rule_id, "severity": f.severity.name, "description": f.description}
        for f in findings
    ]


def approval_view(record: ApprovalRecord) -> dict[str, Any]:
    """The public shape of a pending approval (times are epoch seconds).

    QwenPaw's fields come first; Tether has one agent and no session trees, so the
    root session is the session and the agent is ``default``.
    """
    similar = record.similar_pattern
    patterns = {
        "exact": exact_text(record.tool_name, record.arguments),
        "similar": pattern_text(similar) if similar is not None else None,
    }
    return {
        "request_id": record.request_id,
        "session_id": record.session_id,
        "root_session_id": record.session_id,
        "agent_id": DEFAULT_AGENT_ID,
        "owner_agent_id": DEFAULT_AGENT_ID,
        "tool_name": record.tool_name,
        "tool_display_name": record.tool_name,
        "tool_source": record.findings[0]["rule_id"] if record.findings else "No rule hit",
        "exact_target": patterns["exact"],
        "similar_target": patterns["similar"] or "",
        # Whether approving "similar" covers more than this very call.
        "is_generalized": patterns["similar"] not in (None, patterns["exact"]),
        "reasoning": "",
        "severity": _highest_severity(record.findings),
        "findings_count": len(record.findings),
        "created_at": record.created_at,
        "timeout_seconds": record.expires_at - record.created_at,
        "result_summary": "; ".join(f["description"] for f in record.findings),
        "tool_call_id": record.tool_call_id,
        "arguments": record.arguments,
        "findings": record.findings,
        "expires_at": record.expires_at,
        "patterns": patterns,
    }


def _highest_severity(findings: Sequence[dict[str, str]]) -> str:
    ranks = {s.name: s.value for s in Severity}
    names = [f["severity"] for f in findings if f.get("severity") in ranks]
    return max(names, key=ranks.__getitem__).lower() if names else "low"


#: The answer to a wait whose request the store had decided already when this node came
#: to record its own decision (a person's, expiry or a cancel): a survivor denied it,
#: having declared this node lost while it was frozen or cut off. That stands, the call
#: never runs, and the survivor audited it: this node does not again.
DECIDED_ELSEWHERE = Admission(
    False, "another node denied it first: this node was declared lost meanwhile", "cancel"
)
#: Why a request whose call was cancelled while it waited is denied.
CANCELLED_WHILE_AWAITING = "the call was cancelled while awaiting approval"


class ApprovalService:
    """Open, wait on, settle and list approval requests."""

    def __init__(
        self,
        repo: GovernanceRepository,
        timeout_seconds: float,
        memory: DecisionMemory | None = None,
        elsewhere: Elsewhere | None = None,
        owner: str | None = None,
    ) -> None:
        self._repo = repo
        self.timeout_seconds = timeout_seconds
        self._memory = memory
        self._pending: dict[str, _Pending] = {}
        # Other nodes (a cluster): a request whose call waits on another node is
        # decided there, and the pending list is read from the store.
        self._elsewhere = elsewhere
        # This server's owner id: a request whose call it owns is never another node's.
        self._owner = owner
        #: Set at an exit that leaves calls for the next start (TETHER_ON_SHUTDOWN=detach):
        #: a wait cut by it leaves its request pending, and the next start denies it as
        #: one a crash left ("the server restarted while the call awaited approval").
        self.detaching = False

    async def open(
        self,
        inv: Invocation,
        level: str,
        findings: Sequence[Finding],
        similar_pattern: Sequence[str | None] | None = None,
    ) -> ApprovalRecord:
        """Record a new pending request for ``inv``."""
        now = time.time()
        record = ApprovalRecord(
            request_id=uuid.uuid4().hex,
            session_id=inv.session_id,
            tool_call_id=inv.call_id,
            tool_name=inv.tool_name,
            arguments=inv.arguments,
            level=level,
            findings=findings_data(findings),
            status="pending",
            decided_by=None,
            reason=None,
            created_at=now,
            expires_at=now + self.timeout_seconds,
            decided_at=None,
            similar_pattern=list(similar_pattern) if similar_pattern is not None else None,
        )
        await self._repo.add_approval(record)
        self._pending[record.request_id] = _Pending(record)
        return record

    async def wait(
        self, request_id: str, on_cancelled: Callable[[], Awaitable[None]] | None = None
    ) -> Admission:
        """Wait for a decision on an open request; expiry denies it. DECIDED_ELSEWHERE if
        another node had denied it first.

        If the waiter is cancelled (the call was cancelled or its task stopped), the
        request is denied and recorded, and ``on_cancelled`` run (to audit it), before the
        cancellation goes on; neither if the server is leaving it for the next start
        (``detaching``), and no ``on_cancelled`` if another node had denied it first.
        """
        entry = self._pending[request_id]
        delay = max(0.0, entry.record.expires_at - time.time())
        try:
            return await within(asyncio.shield(entry.answer), delay)
        except TimeoutError:
            reason = f"no one approved it within {self.timeout_seconds:g} seconds"
            return await self._settle_unless_decided(entry, Admission(False, reason, "timeout"))
        except asyncio.CancelledError:
            if self.detaching and not entry.decided:
                raise
            answer = Admission(False, CANCELLED_WHILE_AWAITING, "cancel")
            settled = await asyncio.shield(self._settle_unless_decided(entry, answer))
            # Not audited here if the node that denied it first did, or the next start will.
            ours_to_audit = settled is not DECIDED_ELSEWHERE and not self.detaching
            if on_cancelled is not None and ours_to_audit:
                await asyncio.shield(on_cancelled())
            raise
        finally:
            self._pending.pop(request_id, None)

    async def _settle_unless_decided(self, entry: _Pending, answer: Admission) -> Admission:
        async with entry.deciding:
            if entry.decided:
                # A person decided at the same moment; their answer stands.
                return await entry.answer
            entry.decided = True
            try:
                if not await self._repo.decide_approval(
                    entry.record.request_id, "denied", answer.decided_by, answer.reason
                ):
                    answer = DECIDED_ELSEWHERE
            finally:
                entry.answer.set_result(answer)
        return answer

    async def resolve(
        self,
        request_id: str,
        session_id: str,
        approve: bool,
        reason: str | None,
        scope: Scope = "once",
        remember: Remember = "session",
    ) -> tuple[ApprovalRecord, RememberedRule | None]:
        """A person's decision, remembered for later calls unless ``scope`` is ``once``.

        Raises ApprovalNotFound, ApprovalForbidden, ApprovalDecided or CannotRemember
        (nothing changed); ApprovalDecided too if the store had it decided already (a
        survivor denied it, this node having been declared lost), and the call is denied.
        """
        entry = self._pending.get(request_id)
        if entry is None:
            args = {
                "request_id": request_id,
                "session_id": session_id,
                "approve": approve,
                "reason": reason,
                "scope": scope,
                "remember": remember,
            }
            return await self._resolve_elsewhere(args)
        if entry.record.session_id != session_id:
            raise ApprovalForbidden()
        async with entry.deciding:
            # Under the lock: a concurrent answer, the timeout or a cancel finds the
            # request decided, so only the decision that won stores its rule.
            if entry.decided:
                raise ApprovalDecided()
            rule = None
            if self._memory is not None:
                action: Action = "approve" if approve else "deny"
                rule = self._memory.draft(entry.record, action, scope, remember)
            entry.decided = True
            answer = await self._decide(entry, approve, reason)
        if answer is DECIDED_ELSEWHERE:
            raise ApprovalDecided()
        if rule is not None and self._memory is not None:
            try:
                await self._memory.keep(rule)
            except OutOfStorage as exc:
                # The decision is stored and the call has it: a 507 would say nothing
                # was kept. Only the rule is not, which the answer shows (none).
                log.warning("approval %s was decided, but not remembered: %s", request_id, exc)
                rule = None
        return entry.record, rule

    async def _decide(self, entry: _Pending, approve: bool, reason: str | None) -> Admission:
        """Store a person's decision and hand it to the waiting call. One the store
        refuses for want of room is not handed on: the request stays pending (the
        answer was a 507, nothing kept), to be answered again once there is room."""
        status = "approved" if approve else "denied"
        answer = Admission(approve, reason or "", "user")
        request_id = entry.record.request_id
        try:
            if not await self._repo.decide_approval(request_id, status, "user", reason):
                answer = DECIDED_ELSEWHERE
        except OutOfStorage:
            entry.decided = False
            raise
        except BaseException:
            # Whatever became of the write, the waiting call must not hang on it.
            entry.answer.set_result(answer)
            raise
        entry.answer.set_result(answer)
        return answer

    async def _resolve_elsewhere(
        self, args: dict[str, Any]
    ) -> tuple[ApprovalRecord, RememberedRule | None]:
        """Have the node whose call waits on the request decide it (ApprovalNotFound if
        no node waits on it; that node's own errors otherwise). Unavailable, nothing
        decided, if another node's call waits on it and this node cannot reach that node
        (no Redis)."""
        request_id = args["request_id"]
        # A request no longer pending (decided, expired, cancelled) is unknown, a 404,
        # as in QwenPaw, which forgets it once decided; 409 is for an answer that lost a
        # race to another.
        # Without Redis only a call still waiting counts: a node that cannot ask the
        # owner refuses (Unavailable) what it runs, and leaves anything else unknown.
        owner = await self._repo.waiting_owner(request_id, waiting=self._elsewhere is None)
        record = await self._repo.get_approval(request_id)
        # A request of this node's own call that nothing here waits on (its wait was
        # left for the next start at a detaching exit, or has just ended) is unknown
        # here as on one node: asking this node again would go round in a circle.
        if owner in (None, self._owner) or record is None:
            raise ApprovalNotFound(request_id)
        if record.session_id != args["session_id"]:
            raise ApprovalForbidden()
        if record.status != "pending":
            raise ApprovalDecided()
        if self._elsewhere is None:
            raise unreachable(f"the tool call awaiting approval {request_id}")
        rule = await self._elsewhere.ask(owner, "approval.resolve", args, f"approval {request_id}")
        return record, RememberedRule(**rule) if rule else None

    async def resolve_here(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """Another node's :meth:`resolve` for a call waiting here: the rule remembered."""
        _record, rule = await self.resolve(
            args["request_id"],
            args["session_id"],
            bool(args["approve"]),
            args.get("reason"),
            args.get("scope") or "once",
            args.get("remember") or "session",
        )
        return dataclasses.asdict(rule) if rule is not None else None

    async def pending_anywhere(self, session_id: str | None = None) -> list[ApprovalRecord]:
        """Pending requests of every node (in a cluster, from the store), oldest first."""
        if self._elsewhere is not None:
            return await self._repo.pending_approvals(session_id)
        return self.list_pending(session_id)

    def list_pending(self, session_id: str | None = None) -> list[ApprovalRecord]:
        """This node's pending requests, oldest first, for one session or all."""
        records = [p.record for p in self._pending.values() if not p.decided]
        if session_id is not None:
            records = [r for r in records if r.session_id == session_id]
        return sorted(records, key=lambda r: r.created_at)

    async def deny_leftovers(
        self, why: LeftBehind = RESTARTED, owners: Collection[str] | None = None
    ) -> list[ApprovalRecord]:
        """Deny what a server that is gone left pending (at start-up, or when a node is
        lost: then only what its ``owners`` left); returns those requests."""
        return await self._repo.deny_pending_approvals(why.decided_by, why.reason, owners)
