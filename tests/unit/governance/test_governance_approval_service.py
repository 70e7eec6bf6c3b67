"""ApprovalService over a real SQLite store: decide, expire, cancel, recover."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tether.errors import OutOfStorage
from tether.governance.approvals import (
    ApprovalForbidden,
    ApprovalNotFound,
    ApprovalService,
    approval_view,
)
from tether.governance.findings import Finding, Severity
from tether.store.database import Database
from tether.store.governance import GovernanceRepository
from tether.toolcalls.call import Invocation

FINDING = Finding("git-push", Severity.MEDIUM, "Pushes to a remote")


def _inv(call_id: str = "call-1", session_id: str = "s1") -> Invocation:
    return Invocation(
        call_id, session_id, "task-1", "default", "execute_shell_command", {"command": "git push"}
    )


@pytest.fixture
async def repo(database_url: str) -> AsyncIterator[GovernanceRepository]:
    db = Database(database_url)
    await db.migrate()
    yield GovernanceRepository(db)
    await db.close()


async def test_open_lists_and_stores_the_request(repo: GovernanceRepository) -> None:
    service = ApprovalService(repo, 300)
    record = await service.open(_inv(), "smart", [FINDING])

    view = approval_view(record)
    assert view["findings"] == [
        {"rule_id": "git-push", "severity": "MEDIUM", "description": "Pushes to a remote"}
    ]
    assert view["expires_at"] == pytest.approx(view["created_at"] + 300)
    assert service.list_pending("s1") == [record]
    assert service.list_pending("other") == []
    stored = await repo.get_approval(record.request_id)
    assert stored is not None and stored.status == "pending"


async def test_a_person_approves_and_the_waiter_gets_it(repo: GovernanceRepository) -> None:
    service = ApprovalService(repo, 300)
    record = await service.open(_inv(), "strict", [])
    waiter = asyncio.create_task(service.wait(record.request_id))

    await service.resolve(record.request_id, "s1", True, None)

    answer = await waiter
    assert (answer.allowed, answer.decided_by) == (True, "user")
    assert service.list_pending() == []
    stored = await repo.get_approval(record.request_id)
    assert stored is not None and (stored.status, stored.decided_by) == ("approved", "user")
    with pytest.raises(ApprovalNotFound):
        await service.resolve(record.request_id, "s1", False, None)


async def test_an_answer_the_store_refuses_leaves_the_request_pending(
    repo: GovernanceRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer was a 507 ("nothing of this write was kept"), yet the call went on
    with it; the request was gone, and a person could not answer again once there was
    room."""
    service = ApprovalService(repo, 300)
    record = await service.open(_inv(), "strict", [])
    waiter = asyncio.create_task(service.wait(record.request_id))
    decide = repo.decide_approval

    async def full(*args: object) -> bool:
        raise OutOfStorage("the database cannot be written (database or disk is full)")

    monkeypatch.setattr(repo, "decide_approval", full)
    with pytest.raises(OutOfStorage):
        await service.resolve(record.request_id, "s1", True, None)
    assert service.list_pending("s1") == [record]
    assert not waiter.done()

    monkeypatch.setattr(repo, "decide_approval", decide)
    await service.resolve(record.request_id, "s1", False, "not now")
    answer = await waiter
    assert (answer.allowed, answer.decided_by, answer.reason) == (False, "user", "not now")
    stored = await repo.get_approval(record.request_id)
    assert stored is not None and (stored.status, stored.decided_by) == ("denied", "user")


async def test_only_the_owning_session_may_decide(repo: GovernanceRepository) -> None:
    service = ApprovalService(repo, 300)
    record = await service.open(_inv(), "strict", [])
    with pytest.raises(ApprovalForbidden):
        await service.resolve(record.request_id, "s2", True, None)
    with pytest.raises(ApprovalNotFound):
        await service.resolve("nope", "s1", True, None)
    assert service.list_pending() == [record]


async def test_an_unanswered_request_expires_denied(repo: GovernanceRepository) -> None:
    service = ApprovalService(repo, 0.05)
    record = await service.open(_inv(), "strict", [])

    answer = await service.wait(record.request_id)

    assert (answer.allowed, answer.decided_by) == (False, "timeout")
    assert "0.05 seconds" in answer.reason
    stored = await repo.get_approval(record.request_id)
    assert stored is not None and (stored.status, stored.decided_by) == ("denied", "timeout")
    with pytest.raises(ApprovalNotFound):
        await service.resolve(record.request_id, "s1", True, None)


async def test_cancelling_the_waiter_denies_the_request(repo: GovernanceRepository) -> None:
    service = ApprovalService(repo, 300)
    record = await service.open(_inv(), "strict", [])
    waiter = asyncio.create_task(service.wait(record.request_id))
    await asyncio.sleep(0)  # let it start waiting

    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter

    assert service.list_pending() == []
    stored = await repo.get_approval(record.request_id)
    assert stored is not None and (stored.status, stored.decided_by) == ("denied", "cancel")


async def test_requests_left_by_a_previous_run_are_denied(repo: GovernanceRepository) -> None:
    before = ApprovalService(repo, 300)
    record = await before.open(_inv(), "strict", [FINDING])

    after = ApprovalService(repo, 300)
    leftovers = await after.deny_leftovers()

    assert [r.request_id for r in leftovers] == [record.request_id]
    stored = await repo.get_approval(record.request_id)
    assert stored is not None
    assert (stored.status, stored.decided_by, stored.reason) == (
        "denied",
        "restart",
        "server restarted",
    )
    assert await after.deny_leftovers() == []


@pytest.mark.parametrize(
    ("similar", "generalized"),
    [(["git", "push"], False), (["git", None], True), (None, False)],
)
async def test_is_generalized_only_when_the_similar_pattern_covers_more(
    repo: GovernanceRepository, similar: list[str | None] | None, generalized: bool
) -> None:
    """As QwenPaw: a similar pattern equal to the exact command generalises nothing (a
    client offered "approve similar" for `git push` that covered only `git push`)."""
    record = await ApprovalService(repo, 300).open(_inv(), "strict", [], similar)

    view = approval_view(record)

    assert view["is_generalized"] is generalized
