"""Writes asked for together share one transaction, each writer keeps its own outcome, and
writes commit in the order they were asked for (tether.store.group_commit). On
PostgreSQL ``write_grouped`` is a plain write: the same outcomes, one transaction each."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
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


async def _opened(url: str) -> Database:
    database = Database(url)
    async with database.write() as conn:
        await conn.run_sync(_meta.create_all)
    return database


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """The run's database: outcomes must be the same on both."""
    database = await _opened(database_url)
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[Database]:
    """SQLite whatever the run: writes are grouped there only (on PostgreSQL each is
    its own transaction, concurrent with the others)."""
    database = await _opened(f"sqlite+aiosqlite:///{tmp_path / 'grouped.db'}")
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


async def test_writes_asked_together_are_committed_in_one_transaction(sqlite: Database) -> None:
    commits = _count_commits(sqlite)
    inserts = [sqlite.write_grouped(_INSERT, {"id": i, "name": f"n{i}"}) for i in range(10)]
    renames = [sqlite.write_grouped(_RENAME, {"b_id": i, "note": "x"}) for i in (7, 8)]
    await asyncio.gather(*inserts, *renames)
    assert len(commits) == 1
    rows = await _rows(sqlite)
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


async def test_writes_asked_while_a_group_commits_go_in_the_next(sqlite: Database) -> None:
    commits = _count_commits(sqlite)
    first = asyncio.gather(
        *[sqlite.write_grouped(_INSERT, {"id": i, "name": f"a{i}"}) for i in range(3)]
    )
    await asyncio.sleep(0)  # the first group is being committed
    second = asyncio.gather(
        *[sqlite.write_grouped(_INSERT, {"id": i, "name": f"b{i}"}) for i in range(3, 6)]
    )
    await asyncio.gather(first, second)
    assert len(commits) == 2
    assert len(await _rows(sqlite)) == 6


async def test_a_writer_cancelled_after_asking_leaves_the_others_unharmed(sqlite: Database) -> None:
    cancelled = asyncio.create_task(sqlite.write_grouped(_INSERT, {"id": 1, "name": "a"}))
    other = asyncio.create_task(sqlite.write_grouped(_INSERT, {"id": 2, "name": "b"}))
    await asyncio.sleep(0)
    cancelled.cancel()
    await other
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    # Asked for before the cancel, it was committed with the rest (as a write cancelled
    # during its commit can be).
    assert [r[1] for r in await _rows(sqlite)] == ["a", "b"]


async def _a_transaction_began(db: Database) -> None:
    began: list[int] = []
    sa.event.listen(db.engine.sync_engine, "begin", lambda conn: began.append(1))
    while not began:
        await asyncio.sleep(0)


async def test_a_write_asked_after_a_grouped_one_commits_after_it(sqlite: Database) -> None:
    await sqlite.write_grouped(_INSERT, {"id": 1, "name": "a"})
    first = asyncio.create_task(sqlite.write_grouped(_RENAME, {"b_id": 1, "note": "first"}))
    await _a_transaction_began(sqlite)  # the first group is being committed
    # An update queued behind it, then a write of the same row that is not grouped (a
    # call's end after a deadline's offload was asked): the end must land last.
    late = asyncio.create_task(sqlite.write_grouped(_RENAME, {"b_id": 1, "note": "queued"}))
    await asyncio.sleep(0)

    async def direct() -> None:
        async with sqlite.write() as conn:
            await conn.execute(_RENAME, {"b_id": 1, "note": "last"})

    await asyncio.gather(first, late, direct())
    assert [r[2] for r in await _rows(sqlite)] == ["last"]


async def test_each_writer_hears_once_its_write_has_its_outcome(db: Database) -> None:
    heard: list[str] = []
    ok = db.write_grouped(_INSERT, {"id": 1, "name": "a"}, then=lambda: heard.append("ok"))
    clash = db.write_grouped(_INSERT, {"id": 2, "name": "a"}, then=lambda: heard.append("no"))
    results = await asyncio.gather(ok, clash, return_exceptions=True)
    assert results[0] is None and isinstance(results[1], sa.exc.IntegrityError)
    # The failed write's error is its own: the failed group's (whose message carries
    # its neighbours' values) is not chained to it.
    chain: list[BaseException] = []
    error: BaseException | None = results[1]
    while error is not None:
        chain.append(error)
        error = error.__context__
    assert [e for e in chain if isinstance(e, sa.exc.StatementError)] == [results[1]]
    assert sorted(heard) == ["no", "ok"]


async def test_closing_the_database_commits_what_was_asked_for_first(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'closed.db'}"
    database = await _opened(url)
    heard: list[int] = []
    writes = [
        asyncio.create_task(
            database.write_grouped(
                _INSERT, {"id": i, "name": f"n{i}"}, then=lambda: heard.append(1)
            )
        )
        for i in range(5)
    ]
    await asyncio.sleep(0)
    await database.close()
    assert len(heard) == 5 and all(w.done() for w in writes)
    again = Database(url)
    try:
        assert len(await _rows(again)) == 5
    finally:
        await again.close()


async def test_a_failing_then_leaves_the_writes_behind_it_committed(
    sqlite: Database, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("announcement failed")

    first = sqlite.write_grouped(_INSERT, {"id": 1, "name": "a"}, then=broken)
    second = sqlite.write_grouped(_INSERT, {"id": 2, "name": "b"})
    await asyncio.gather(first, second)
    assert [r[1] for r in await _rows(sqlite)] == ["a", "b"]
    assert "what follows a grouped write failed" in caplog.text
