"""The one-hop SQLite driver behaves like SQLAlchemy's own aiosqlite adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tether.store.database import Database
from tether.store.sqlite_driver import OneHopConnection

_meta = sa.MetaData()
_items = sa.Table(
    "items",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String, unique=True, nullable=False),
)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}")
    async with database.write() as conn:
        await conn.run_sync(_meta.create_all)
    yield database
    await database.close()


async def test_the_engine_uses_the_one_hop_connection(db: Database) -> None:
    async with db.read() as conn:
        raw = await conn.get_raw_connection()
        assert isinstance(raw.dbapi_connection, OneHopConnection)


async def test_rows_keys_and_counts_come_back(db: Database) -> None:
    async with db.write() as conn:
        first = await conn.execute(_items.insert().values(name="a"))
        await conn.execute(_items.insert(), [{"name": "b"}, {"name": "c"}])
        renamed = await conn.execute(
            sa.update(_items).where(_items.c.name.in_(["b", "c"])).values(name=_items.c.name + "!")
        )
    assert first.inserted_primary_key == (1,)
    assert renamed.rowcount == 2
    async with db.read() as conn:
        names = (await conn.execute(sa.select(_items.c.name).order_by(_items.c.id))).scalars()
        assert list(names) == ["a", "b!", "c!"]
        assert await conn.scalar(sa.select(sa.func.count()).select_from(_items)) == 3


async def test_a_failed_write_raises_integrity_error_and_keeps_nothing(db: Database) -> None:
    with pytest.raises(sa.exc.IntegrityError):
        async with db.write() as conn:
            await conn.execute(_items.insert().values(name="x"))
            await conn.execute(_items.insert().values(name="x"))
    async with db.read() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(_items)) == 0


async def test_a_read_leaves_no_transaction_open(db: Database) -> None:
    async with db.read() as conn:
        await conn.execute(sa.select(_items))
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
    # Back in the pool: the read's implicit transaction (if any) was ended.
    assert driver is not None and not driver.in_transaction
    # The next write on the pooled connection works (no stale read transaction).
    async with db.write() as conn:
        await conn.execute(_items.insert().values(name="after"))
    async with db.read() as conn:
        assert await conn.scalar(sa.select(_items.c.name)) == "after"
