"""Writes asked for together share one transaction, and each writer keeps its own outcome
(tether.store.group_commit), on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from tether.store.database import Database

_meta = sa.MetaData()
_items = sa.Table(
    "group_items",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(50), unique=True, nullable=False),
    sa.Column("note", sa.String(50), nullable=True),
)
_INSERT = _items.insert()
_RENAME = sa.update(_items).where(_items.c.id == sa.bindparam("b_id"))


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    async with database.write() as conn:
        await conn.run_sync(_meta.create_all)
    try:
        yield database
    finally:
        await database.close()


def _count_commits(db: Database) -> list[int]:
    commits: list[int] = []
    sa.event.listen(db.engine.sync_engine, "commit", lambda conn: commits.append(1))
    return commits


async def _rows(db: Database) -> list[tuple[Any, ...]]:
    async with db.read() as conn:
        result = await conn.execute(sa.select(_items).order_by(_items.c.id))
        return [tuple(r) for r in result]


async def test_writes_asked_together_are_committed_in_one_transaction(db: Database) -> None:
    commits = _count_commits(db)
    inserts = [db.write_grouped(_INSERT, {"id": i, "name": f"n{i}"}) for i in range(10)]
    renames = [db.write_grouped(_RENAME, {"b_id": i, "note": "x"}) for i in (7, 8)]
    await asyncio.gather(*inserts, *renames)
    assert len(commits) == 1
    rows = await _rows(db)
    assert [r[1] for r in rows] == [f"n{i}" for i in range(10)]
    assert [r[0] for r in rows if r[2] == "x"] == [7, 8]


async def test_a_failing_write_fails_alone(db: Database) -> None:
    await db.write_grouped(_INSERT, {"id": 0, "name": "taken"})
    writes = [db.write_grouped(_INSERT, {"id": i, "name": f"n{i}"}) for i in range(1, 6)]
    clash = db.write_grouped(_INSERT, {"id": 9, "name": "taken"})
    results = await asyncio.gather(*writes, clash, return_exceptions=True)
    assert results[:5] == [None] * 5
    assert isinstance(results[5], sa.exc.IntegrityError)
    assert [r[1] for r in await _rows(db)] == ["taken", "n1", "n2", "n3", "n4", "n5"]


async def test_writes_asked_while_a_group_commits_go_in_the_next(db: Database) -> None:
    commits = _count_commits(db)
    first = asyncio.gather(
        *[db.write_grouped(_INSERT, {"id": i, "name": f"a{i}"}) for i in range(3)]
    )
    await asyncio.sleep(0)  # the first group is being committed
    second = asyncio.gather(
        *[db.write_grouped(_INSERT, {"id": i, "name": f"b{i}"}) for i in range(3, 6)]
    )
    await asyncio.gather(first, second)
    assert len(commits) == 2
    assert len(await _rows(db)) == 6


async def test_a_writer_cancelled_after_asking_leaves_the_others_unharmed(db: Database) -> None:
    cancelled = asyncio.create_task(db.write_grouped(_INSERT, {"id": 1, "name": "a"}))
    other = asyncio.create_task(db.write_grouped(_INSERT, {"id": 2, "name": "b"}))
    await asyncio.sleep(0)
    cancelled.cancel()
    await other
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    # Asked for before the cancel, it was committed with the rest (as a write cancelled
    # during its commit can be).
    assert [r[1] for r in await _rows(db)] == ["a", "b"]
