"""Node loss over a real store: the survivor ends exactly the lost owner's rows (calls
``error`` "node lost", tasks failed, cron runs closed, requests denied and audited); a
node that comes back stops only what the store shows ended for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from node_stores import call, owner_of

from tether import node_loss
from tether.governance.analyzer import Analyzer
from tether.governance.approvals import ApprovalDecided, ApprovalService
from tether.governance.context import AnalysisContext
from tether.governance.gate import GovernanceGate
from tether.store.database import Database
from tether.store.records import NodeRecord
from tether.store.store import Store
from tether.toolcalls.call import Invocation


def gate_over(store: Store, approvals: ApprovalService | None = None) -> GovernanceGate:
    context = AnalysisContext(Path("/w"), Path("/h"), Path("/h/.tether"))
    approvals = approvals or ApprovalService(store.governance, 300)
    return GovernanceGate(Analyzer(), context, approvals, store.governance)


def _told(into: list[tuple[str, dict[str, Any]]]) -> Callable[[str, dict[str, Any]], None]:
    """A webhook notifier keeping what it was told in ``into``."""
    return lambda event, data: into.append((event, data))


def lease_of(owner: str | None) -> NodeRecord:
    return NodeRecord("node-a", "1.0", 1.0, 2.0, 1, 1, owner)


async def test_the_survivor_ends_only_the_lost_owners_rows(
    servers: Callable[[], Store],
) -> None:
    lost, live, survivor = servers(), servers(), servers()
    await lost.tasks.open_in_session("t-lost", ("s", "u", "console", None), "user", None, [])
    await live.tasks.open_in_session("t-live", ("s", "u", "console", None), "user", None, [])
    await lost.tool_calls.insert(call("running", task_id="t-lost"))
    await lost.tool_calls.insert(call("asking", "awaiting_approval"))
    await live.tool_calls.insert(call("theirs", "awaiting_approval", task_id="t-live"))
    inv = Invocation("asking", "s", "t-lost", "default", "shell", {"command": "ls"})
    asked = await ApprovalService(lost.governance, 300).open(inv, "strict", [])
    theirs = Invocation("theirs", "s", "t-live", "default", "shell", {"command": "ls"})
    kept = await ApprovalService(live.governance, 300).open(theirs, "strict", [])
    await lost.cron.create("job", {}, True, 1.0, None)
    assert await lost.cron.start_manual("job", "run-lost", 1.0, owner_of(lost)) == "started"

    notified: list[tuple[str, dict[str, Any]]] = []
    await node_loss.end_lost_node(
        survivor, gate_over(survivor), _told(notified), lease_of(owner_of(lost))
    )

    ended = {
        "running": ("error", "node lost"),
        # It never ran, and no one can answer for it now: denied, saying why.
        "asking": ("denied", "the node running the call was lost while it awaited approval"),
    }
    for call_id, (end_state, reason) in ended.items():
        record = await survivor.tool_calls.get("s", call_id)
        assert record is not None
        assert (record.status, record.end_state, record.end_reason) == (
            "completed",
            end_state,
            reason,
        )
    task = await survivor.tasks.get("t-lost")
    assert task is not None and task.result == {"status": "failed", "error": "node lost"}
    run = await survivor.cron.get_run("run-lost")
    assert run is not None and (run.status, run.error) == ("error", "node lost")
    request = await survivor.governance.get_approval(asked.request_id)
    assert request is not None
    assert (request.status, request.decided_by, request.reason) == (
        "denied",
        "node_lost",
        "node lost",
    )
    (entry,) = await survivor.governance.list_audit("s", 10)
    assert (entry.request_id, entry.outcome, entry.decided_by) == (
        asked.request_id,
        "denied",
        "node_lost",
    )
    # The live node's call, task and request are not touched.
    theirs_now = await survivor.tool_calls.get("s", "theirs")
    assert theirs_now is not None and theirs_now.status == "awaiting_approval"
    live_task = await survivor.tasks.get("t-live")
    assert live_task is not None and live_task.status == "pending"
    still = await survivor.governance.get_approval(kept.request_id)
    assert still is not None and still.status == "pending"
    # Subscribers learn of the task and the run that ended so (they heard nothing).
    assert notified == [
        (
            "task.finished",
            {
                "task_id": "t-lost",
                "session_id": "s",
                "trigger": "user",
                "result": {"status": "failed", "error": "node lost"},
            },
        ),
        (
            "cron.run_failed",
            {"job_id": "job", "run_id": "run-lost", "status": "error", "error": "node lost"},
        ),
    ]


async def test_a_lost_lease_without_an_owner_ends_nothing(db: Database) -> None:
    old = Store(db)  # rows from before owners were recorded
    await old.tool_calls.insert(call("old"))
    await node_loss.end_lost_node(old, gate_over(old), _told([]), lease_of(None))
    record = await old.tool_calls.get("s", "old")
    assert record is not None and record.status == "running"


async def test_the_first_recorded_end_stands(servers: Callable[[], Store]) -> None:
    store = servers()
    await store.tool_calls.insert(call("c"))
    await store.tasks.open_in_session("t", ("s", "u", "console", None), "user", None, [])
    await node_loss.end_lost_node(store, gate_over(store), _told([]), lease_of(owner_of(store)))
    # The node that ran them, back, records its own ends: they do not replace the first.
    assert not await store.tool_calls.record_end("c", end_state="cancelled", end_reason="x")
    await store.tasks.finish("t", {"status": "failed", "error": "the task was stopped"})
    record, task = await store.tool_calls.get("s", "c"), await store.tasks.get("t")
    assert record is not None and record.end_reason == "node lost"
    assert task is not None and task.result == {"status": "failed", "error": "node lost"}


@dataclass
class FakeCalls:
    live: list[tuple[str, str]]
    cancelled: list[tuple[str, bool]] = field(default_factory=list)

    def live_ids(self) -> list[tuple[str, str]]:
        return list(self.live)

    async def cancel(self, session_id: str, call_id: str, force: bool) -> None:
        self.cancelled.append((call_id, force))


@dataclass
class FakeTasks:
    running: list[str]
    stopped: list[str] = field(default_factory=list)

    def running_ids(self) -> list[str]:
        return list(self.running)

    async def stop(self, task_id: str) -> bool:
        self.stopped.append(task_id)
        return True


async def test_a_returning_node_stops_only_what_was_ended_for_it(
    servers: Callable[[], Store],
) -> None:
    store = servers()
    for call_id in ("ended", "going"):
        await store.tool_calls.insert(call(call_id))
    for task_id in ("failed", "going"):
        await store.tasks.open_in_session(task_id, ("s", "u", "console", None), "user", None, [])
    assert await store.tool_calls.record_end("ended", end_state="error", end_reason="node lost")
    await store.tasks.finish("failed", {"status": "failed", "error": "node lost"})

    calls = FakeCalls([("s", "ended"), ("s", "going")])
    tasks = FakeTasks(["failed", "going"])
    await node_loss.drop_what_was_ended(store, calls, tasks)
    assert calls.cancelled == [("ended", True)]
    assert tasks.stopped == ["failed"]


async def test_a_live_nodes_request_whose_call_just_ended_is_left_to_it(
    servers: Callable[[], Store],
) -> None:
    # The live node's call has ended and it is about to settle the call's request
    # itself: the survivor of another node's loss must not decide it for it.
    lost, live, survivor = servers(), servers(), servers()
    await live.tool_calls.insert(call("ended", "completed"))
    inv = Invocation("ended", "s", None, "default", "shell", {"command": "ls"})
    theirs = await ApprovalService(live.governance, 300).open(inv, "strict", [])

    await node_loss.end_lost_node(
        survivor, gate_over(survivor), _told([]), lease_of(owner_of(lost))
    )

    still = await survivor.governance.get_approval(theirs.request_id)
    assert still is not None and still.status == "pending"
    assert await survivor.governance.list_audit("s", 10) == []


class Events:
    """A turn's events, dropped."""

    def emit(self, event: dict[str, Any]) -> None:
        pass


@pytest.mark.parametrize("back_with", ["its call stopped", "a person's approval"])
async def test_a_returning_node_does_not_audit_the_survivors_denial_again(
    servers: Callable[[], Store], back_with: str
) -> None:
    """The survivor denies and audits the lost node's pending request; the node, back,
    either stops the call that waited (it was ended for it) or is given a person's
    answer before it notices. Its turn audited a second denial of the same request
    ("cancel"), so one decision read as two in the audit trail."""
    lost, survivor = servers(), servers()
    await lost.tool_calls.insert(call("asking", "awaiting_approval"))
    approvals = ApprovalService(lost.governance, 300)
    inv = Invocation("asking", "s", None, "default", "execute_shell_command", {"command": "ls"})
    plan = await gate_over(lost, approvals).plan_admission(inv, "strict", Events())
    assert plan.ask is not None
    asking = asyncio.create_task(plan.ask())
    while not approvals.list_pending():
        assert not asking.done(), "the call was never put to a person"
        await asyncio.sleep(0.001)
    (request,) = approvals.list_pending()

    await node_loss.end_lost_node(
        survivor, gate_over(survivor), _told([]), lease_of(owner_of(lost))
    )

    if back_with == "its call stopped":
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
    else:
        with pytest.raises(ApprovalDecided):
            await approvals.resolve(request.request_id, "s", True, None)
        assert not (await asking).allowed
    (entry,) = await lost.governance.list_audit("s", 10)
    assert (entry.request_id, entry.outcome, entry.decided_by) == (
        request.request_id,
        "denied",
        "node_lost",
    )
