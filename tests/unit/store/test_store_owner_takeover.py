"""Owners and the keeper's adoption together: only a dead owner's calls that were not
adopted are interrupted, and what a server adopts or resumes becomes its own, so a later
server does not take it for a dead server's leftovers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.store.database import Database
from tether.store.records import ToolCallRecord
from tether.store.tasks import TaskRepository
from tether.store.toolcalls import ToolCallRepository


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'tether.db'}")
    await database.migrate()
    try:
        yield database
    finally:
        await database.close()


def running_call(call_id: str, task_id: str | None = None) -> ToolCallRecord:
    return ToolCallRecord(
        call_id, "s", task_id, "default", "shell", {}, "running", None, None, False, None,
        None, None, 1.0, None,
    )  # fmt: skip


async def states(repo: ToolCallRepository, *call_ids: str) -> list[str | None]:
    records = [await repo.get("s", call_id) for call_id in call_ids]
    return [r.end_state if r is not None else "missing" for r in records]


async def test_only_dead_owners_calls_not_adopted_are_interrupted(db: Database) -> None:
    dead, live = ToolCallRepository(db, "dead"), ToolCallRepository(db, "live")
    for call_id in ("lost", "adopted"):
        await dead.insert(running_call(call_id))
    await live.insert(running_call("theirs"))
    me = ToolCallRepository(db, "me")
    await me.take_over({"adopted"})
    await me.interrupt_unfinished("server restarted", {"dead"}, keep={"adopted"})
    assert await states(me, "lost", "adopted", "theirs") == ["cancelled", None, None]
    # The adopted call is now this server's: it is not among a dead owner's leftovers.
    assert await me.unfinished_owners() == {"me", "live"}
    await me.interrupt_unfinished("server restarted", {"dead"})
    assert await states(me, "adopted") == [None]


async def test_a_resumed_task_becomes_the_resuming_servers(db: Database) -> None:
    dead, me = TaskRepository(db, "dead"), TaskRepository(db, "me")
    for task_id in ("resumed", "failed"):
        await dead.open_in_session(task_id, ("s", "u", "console", None), "user", None, [])
    await TaskRepository(db, "live").open_in_session(
        "theirs", ("s", "u", "console", None), "user", None, []
    )
    assert [t.id for t in await me.unfinished({"dead"})] == ["resumed", "failed"]
    await me.count_resume("resumed")
    assert len(await me.fail_unfinished("server restarted", {"dead"}, keep={"resumed"})) == 1
    assert await me.unfinished_owners() == {"me", "live"}
    resumed = await me.get("resumed")
    assert resumed is not None and resumed.status == "pending" and resumed.resumes == 1
