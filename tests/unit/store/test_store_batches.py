"""Lists of ids longer than one statement may bind: PostgreSQL's driver takes at most
32,767 parameters, and the retention sweep asked about every call directory at once
(40,000 expired ones stopped every start). Runs on the database of the test run."""

from __future__ import annotations

from tether.store.database import Database
from tether.store.records import ToolCallRecord
from tether.store.tasks import TaskRepository
from tether.store.toolcalls import ToolCallRepository

MANY = [f"call_{i:06d}" for i in range(40_000)]


def _running(call_id: str) -> ToolCallRecord:
    return ToolCallRecord(
        call_id, "s", None, "default", "shell", {}, "running", None, None, False, None,
        None, None, 1.0, None,
    )  # fmt: skip


async def test_forty_thousand_ids_are_asked_about_in_batches(db: Database) -> None:
    repo = ToolCallRepository(db, "me")
    for call_id in (MANY[0], MANY[-1]):
        await repo.insert(_running(call_id))
    assert await repo.known_ids(MANY) == {MANY[0], MANY[-1]}
    assert await repo.ended_among(MANY) == set()
    await repo.take_over(MANY)
    assert await repo.unfinished_owners() == {"me"}
    assert await TaskRepository(db, "me").finished_among(MANY) == set()
