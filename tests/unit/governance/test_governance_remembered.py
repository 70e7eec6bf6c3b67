"""The gate with remembered decisions and the unattended policy: a remembered approval
covers similar calls (never a CRITICAL one or a new finding), a remembered deny refuses,
a session's rule stays in its session, and an unattended turn is refused at once when
its policy says deny."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.agent.ports import Attendance
from tether.errors import OutOfStorage
from tether.governance.analyzer import Analyzer
from tether.governance.approvals import ApprovalDecided, ApprovalService
from tether.governance.context import AnalysisContext
from tether.governance.findings import Finding, Severity
from tether.governance.gate import GovernanceGate
from tether.governance.memory import CannotRemember, DecisionMemory, RuleNotFound
from tether.store.database import Database
from tether.store.governance import GovernanceRepository
from tether.store.records import ApprovalRecord
from tether.store.remembered import RememberedRepository
from tether.toolcalls.call import AdmissionPlan, Invocation

UNATTENDED_DENY = Attendance(attended=False, when_unattended="deny")


class Events:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.seen.append(event)


class Parts:
    def __init__(self, db: Database, ctx: AnalysisContext) -> None:
        self.db = db
        self.ctx = ctx
        self.repo = GovernanceRepository(db)
        self.memory = DecisionMemory(RememberedRepository(db), ctx)
        self.approvals = ApprovalService(self.repo, 300, self.memory)
        self.notified: list[tuple[str, dict[str, Any]]] = []
        self.gate = GovernanceGate(
            Analyzer(),
            ctx,
            self.approvals,
            self.repo,
            memory=self.memory,
            notify=lambda event, data: self.notified.append((event, data)),
        )

    async def review(
        self, command: str, session: str = "s1", attendance: Attendance | None = None
    ) -> AdmissionPlan:
        inv = Invocation(
            f"c-{command}", session, "t1", "default", "execute_shell_command", {"command": command}
        )
        if attendance is None:
            return await self.gate.plan_admission(inv, "smart", Events())
        return await self.gate.plan_admission(inv, "smart", Events(), attendance)

    async def asking(self, command: str) -> tuple[asyncio.Task[Any], ApprovalRecord]:
        """Ask a person about ``command`` in s1: the admission waiting on the answer, and
        the request it waits on."""
        review = await self.review(command)
        assert review.ask is not None
        admission = asyncio.create_task(review.ask())
        while not self.approvals.list_pending():
            await asyncio.sleep(0)
        (pending,) = self.approvals.list_pending()
        return admission, pending

    async def ask_and_decide(
        self, command: str, approve: bool, scope: Any, remember: Any = "session"
    ) -> Any:
        """Ask about ``command`` in s1 and answer it; returns the admission."""
        admission, pending = await self.asking(command)
        await self.approvals.resolve(pending.request_id, "s1", approve, None, scope, remember)
        return await admission


@pytest.fixture
async def parts(tmp_path: Path, ctx: AnalysisContext) -> AsyncIterator[Parts]:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'gov.db'}")
    await db.migrate()
    yield Parts(db, ctx)
    await db.close()


async def _admitted(review: AdmissionPlan) -> bool:
    """True if the review lets the call run without anyone being asked.

    A remembered approval's admission never suspends, so one turn of the loop finishes
    it; an admission that asks a person cannot finish until someone answers.
    """
    if review.mode == "allow":
        return True
    if review.ask is None:
        return False
    task = asyncio.create_task(review.ask())
    await asyncio.sleep(0)
    if not task.done():
        task.cancel()  # it waits for a person: withdraw the request
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False
    return task.result().allowed


async def test_a_similar_approval_covers_other_branches_but_not_a_force_push(
    parts: Parts,
) -> None:
    first = await parts.ask_and_decide("git push origin main", True, "similar")
    assert first.allowed

    dev = await parts.review("git push origin dev")
    assert await _admitted(dev)
    assert not parts.approvals.list_pending()
    forced = await parts.review("git push --force origin main")
    assert not await _admitted(forced)  # it asks: a finding the person never saw

    audit = await parts.repo.list_audit("s1", 10)
    remembered = [a for a in audit if a.decided_by == "remembered"]
    (rule,) = await parts.memory.rules()
    assert [(a.outcome, a.rule_id, a.reason) for a in remembered] == [
        ("allowed", rule.id, "git push origin *")
    ]


async def test_a_decision_whose_rule_the_store_refuses_stands_unremembered(
    parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer was a 507 ("nothing of this write was kept"), but the decision had
    been stored and the call had it."""

    async def full(rule: Any) -> None:
        raise OutOfStorage("the database cannot be written (database or disk is full)")

    monkeypatch.setattr(parts.memory, "keep", full)
    admission, pending = await parts.asking("git push origin main")
    _record, rule = await parts.approvals.resolve(
        pending.request_id, "s1", True, None, "similar", "session"
    )
    assert rule is None
    assert (await admission).allowed
    stored = await parts.repo.get_approval(pending.request_id)
    assert stored is not None and stored.status == "approved"


async def test_a_session_rule_stays_in_its_session_and_always_does_not(parts: Parts) -> None:
    await parts.ask_and_decide("git push origin main", True, "exact", "session")
    assert await _admitted(await parts.review("git push origin main"))
    assert not await _admitted(await parts.review("git push origin main", session="s2"))

    await parts.ask_and_decide("git push origin dev", True, "exact", "always")
    assert await _admitted(await parts.review("git push origin dev", session="s2"))
    assert [r.session_id for r in (await parts.memory.rules())] == ["s1", None]


async def test_rules_are_shared_through_the_store_and_stop_once_revoked(parts: Parts) -> None:
    await parts.ask_and_decide("git push origin main", True, "similar", "always")
    # Another node (or this one restarted) on the same store.
    elsewhere = DecisionMemory(RememberedRepository(parts.db), parts.ctx)
    (rule,) = await elsewhere.rules()
    assert rule.pattern == "git push origin *"

    # Revoked there: no longer applied here, at once (a copy per process kept it).
    await elsewhere.revoke(rule.id)
    assert not await _admitted(await parts.review("git push origin dev"))
    with pytest.raises(RuleNotFound):
        await parts.memory.revoke(rule.id)


async def test_a_remembered_deny_refuses_at_once(parts: Parts) -> None:
    denied = await parts.ask_and_decide("git push origin main", False, "similar")
    assert not denied.allowed

    review = await parts.review("git push origin other")
    assert review.mode == "deny"
    assert "git push origin *" in review.reason
    assert not parts.approvals.list_pending()


async def test_a_critical_call_is_never_approved_by_a_rule(parts: Parts) -> None:
    await parts.ask_and_decide("rm -rf /tmp/scratch", True, "similar", "always")
    (rule,) = await parts.memory.rules()
    assert rule.pattern == "rm -rf *"

    review = await parts.review("rm -rf /")
    assert review.mode == "deny"  # policy, before any rule
    # Even a rule that lists the CRITICAL finding never approves it.
    critical = [Finding("rm-recursive-system", Severity.CRITICAL, "x")]
    assert await parts.memory.find("s1", rule.tool_name, {"command": "rm -rf /"}, critical) is None


async def test_similar_is_refused_for_a_call_without_a_pattern(parts: Parts) -> None:
    admission, pending = await parts.asking("git push origin main | tee log")
    assert pending.similar_pattern is None

    with pytest.raises(CannotRemember):
        await parts.approvals.resolve(pending.request_id, "s1", True, None, "similar")
    assert parts.approvals.list_pending() == [pending]  # nothing changed
    await parts.approvals.resolve(pending.request_id, "s1", True, None, "exact")
    assert (await admission).allowed
    assert [r.scope for r in (await parts.memory.rules())] == ["exact"]


async def test_only_the_answer_that_decides_keeps_its_rule(parts: Parts) -> None:
    """Answers sent at the same moment: the first decides and keeps its rule; the others
    get ApprovalDecided and keep none (an approve-always that lost to a deny must not
    let the denied command run unasked later)."""
    admission, pending = await parts.asking("git push origin main")
    answers = await asyncio.gather(
        parts.approvals.resolve(pending.request_id, "s1", False, None, "exact", "always"),
        parts.approvals.resolve(pending.request_id, "s1", True, None, "exact", "always"),
        parts.approvals.resolve(pending.request_id, "s1", False, None, "similar", "always"),
        return_exceptions=True,
    )

    assert not isinstance(answers[0], BaseException)
    assert [type(a) for a in answers[1:]] == [ApprovalDecided, ApprovalDecided]
    assert not (await admission).allowed
    (rule,) = await parts.memory.rules()
    assert (rule.action, rule.scope) == ("deny", "exact")
    reloaded = DecisionMemory(RememberedRepository(parts.db), parts.ctx)
    assert [r.id for r in await reloaded.rules()] == [rule.id]
    assert (await parts.review("git push origin main", session="s2")).mode == "deny"


async def test_unattended_deny_refuses_with_the_command_and_the_rule(parts: Parts) -> None:
    review = await parts.review("git push origin main", attendance=UNATTENDED_DENY)

    assert review.mode == "deny"
    assert "'git push origin main'" in review.reason
    assert "git-push" in review.reason
    assert "when_unattended=deny" in review.reason
    assert not parts.approvals.list_pending()
    (entry,) = await parts.repo.list_audit("s1", 10)
    assert (entry.outcome, entry.decided_by) == ("denied", "unattended")


async def test_unattended_wait_and_attended_turns_ask(parts: Parts) -> None:
    waiting = Attendance(attended=False, when_unattended="wait")
    assert (await parts.review("git push origin main", attendance=waiting)).mode == "ask"
    attended = Attendance(attended=True, when_unattended="deny")
    assert (await parts.review("git push origin main", attendance=attended)).mode == "ask"


async def test_a_request_notifies_and_shows_its_patterns(parts: Parts) -> None:
    review = await parts.review("git push origin main")
    assert review.ask is not None
    admission = asyncio.create_task(review.ask())
    while not parts.notified:
        await asyncio.sleep(0)
    ((event, data),) = parts.notified
    assert event == "approval.requested"
    assert data["patterns"] == {"exact": "git push origin main", "similar": "git push origin *"}
    admission.cancel()
    with pytest.raises(asyncio.CancelledError):
        await admission
