"""A database from before owners were recorded (at the revision before 0102_i10_owners)
upgrades in place: its unfinished rows keep their data and read as owned by nobody (so a
start-up recovers them)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tether.store import schema
from tether.store.database import Database
from tether.store.owners import OwnerLock
from tether.store.store import Store


async def test_an_older_database_gets_the_owner_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = Database(f"sqlite+aiosqlite:///{path}")
    async with old.engine.begin() as conn:
        await conn.run_sync(schema.upgrade, "0101_i15_sandbox_columns")
    await old.close()
    with sqlite3.connect(path) as conn:
        assert "owner" not in {row[1] for row in conn.execute("PRAGMA table_info(tasks)")}
        conn.execute(
            "INSERT INTO tasks (id, session_id, user_id, status, trigger, created_at)"
            " VALUES ('t1', 's1', 'u', 'running', 'user', 1.0)"
        )
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        await db.migrate()
        owner = OwnerLock.claim(tmp_path / "owners")
        store = Store(db, owner)
        assert await store.tasks.unfinished_owners() == {None}
        assert await store.tool_calls.unfinished_owners() == set()
        await store.tasks.open_in_session("t2", ("s1", "u", "console", None), "user", None, [])
        assert await store.tasks.unfinished_owners() == {None, owner.id}
        assert len(await store.tasks.fail_unfinished("server restarted", {None})) == 1
        record = await store.tasks.get("t1")
        assert record is not None and record.status == "finished"
        assert await store.tasks.unfinished_owners() == {owner.id}
        owner.release()
    finally:
        await db.close()
