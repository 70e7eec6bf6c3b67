"""The Alembic revisions build exactly `tables.py`, on SQLite and PostgreSQL, and a
store at an older revision is refused at start with the command that upgrades it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from database_support import postgres_url, require_postgresql
from tether.store import schema
from tether.store.database import Database, UnstorableValue
from tether.store.tables import metadata


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    if request.param == "postgresql":
        require_postgresql()
        url = postgres_url(f"schema:{tmp_path}")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'tether.db'}"
    database = Database(url)
    yield database
    await database.close()


def _differences(conn: sa.Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(conn), metadata))


async def test_revisions_build_the_tables_module(db: Database) -> None:
    await db.open_checked()
    async with db.read() as conn:
        assert await conn.run_sync(_differences) == []
        assert await conn.run_sync(schema.current_revision) == schema.head_revision()


def test_the_head_constant_is_where_the_revision_chain_ends() -> None:
    # Every start compares the store with HEAD_REVISION without loading Alembic.
    assert schema.head_revision() == schema.HEAD_REVISION


async def test_a_store_behind_is_refused_until_upgraded(db: Database) -> None:
    async with db.engine.begin() as conn:
        await conn.run_sync(schema.upgrade, "0001_initial")
    with pytest.raises(schema.SchemaError, match="tether db upgrade"):
        await db.open_checked()
    await db.migrate()
    await db.open_checked()
    async with db.read() as conn:
        assert await conn.run_sync(_differences) == []


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ("UPDATE alembic_version SET version_num = '9999_future'", "newer"),
        ("INSERT INTO alembic_version VALUES ('0001_initial')", "several schema revisions"),
    ],
)
async def test_a_recorded_revision_this_tether_cannot_run_on_is_refused(
    db: Database, change: str, refusal: str
) -> None:
    await db.open_checked()
    async with db.write() as conn:
        await conn.execute(sa.text(change))
    with pytest.raises(schema.SchemaError, match=refusal):
        await db.open_checked()


async def _legacy_store(db: Database, recorded: list[str], built_to: str) -> None:
    """A store as the hand-rolled migrations left it: tables up to ``built_to``, no
    Alembic table, and ``recorded`` in `_migrations`."""
    async with db.engine.begin() as conn:
        await conn.run_sync(schema.upgrade, built_to)
        await conn.execute(sa.text("DROP TABLE alembic_version"))
        await conn.execute(sa.text("CREATE TABLE _migrations (name VARCHAR(200) PRIMARY KEY)"))
        for name in recorded:
            await conn.execute(sa.text("INSERT INTO _migrations VALUES (:n)"), {"n": name})


async def test_a_pre_alembic_store_is_stamped_and_upgraded(db: Database) -> None:
    await _legacy_store(db, ["0001_initial", "0002_cron_tables"], "0002_cron_tables")
    with pytest.raises(schema.SchemaError, match=r"before Alembic.*tether db upgrade"):
        await db.open_checked()
    await db.migrate()
    async with db.read() as conn:
        assert await conn.run_sync(_differences) == []
        tables = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
    assert "_migrations" not in tables


@pytest.mark.parametrize(
    ("recorded", "message"),
    [
        (["0001_initial", "0002_cron_tables", "0042_i99_unknown"], "newer version"),
        (["0001_initial", "0003_i17_mcp_clients"], "out of order"),
    ],
)
async def test_a_pre_alembic_store_that_does_not_fit_is_left_alone(
    db: Database, recorded: list[str], message: str
) -> None:
    await _legacy_store(db, recorded, "0002_cron_tables")
    with pytest.raises(schema.SchemaError, match=message):
        await db.migrate()
    async with db.read() as conn:
        tables = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
    assert "_migrations" in tables and "mcp_clients" not in tables


async def test_text_postgresql_cannot_hold_is_an_unstorable_value(db: Database) -> None:
    await db.open_checked()
    insert = sa.text("INSERT INTO app_settings (key, value) VALUES (:key, '1')")
    if db.is_sqlite:
        async with db.write() as conn:
            await conn.execute(insert, {"key": "nul\x00inside"})
        return
    with pytest.raises(UnstorableValue):
        async with db.write() as conn:
            await conn.execute(insert, {"key": "nul\x00inside"})
    with pytest.raises(UnstorableValue):
        async with db.read() as conn:
            await conn.execute(sa.text("SELECT * FROM app_settings WHERE key = :k"), {"k": "\x00"})
    async with db.read() as conn:
        assert (await conn.execute(sa.text("SELECT count(*) FROM app_settings"))).scalar() == 0


async def test_a_downgrade_below_sealed_webhook_urls_removes_those_webhooks(
    db: Database,
) -> None:
    """Their URLs cannot be opened by the migration: kept, the webhooks would post to
    their listed form and fail every attempt. A row from before sealing stays."""
    from alembic import command

    from tether.store.tables import webhook_deliveries, webhooks

    await db.open_checked()
    row = {
        "events": ["task.finished"],
        "description": "",
        "secret_encrypted": "x",
        "created_at": 0.0,
    }
    async with db.write() as conn:
        await conn.execute(
            webhooks.insert(),
            [
                {**row, "id": "sealed", "url": "https://a.example/…", "url_encrypted": "y"},
                {**row, "id": "plain", "url": "https://b.example/in", "url_encrypted": None},
            ],
        )
        await conn.execute(
            webhook_deliveries.insert().values(
                id="msg_1",
                webhook_id="sealed",
                event="task.finished",
                body="{}",
                status="pending",
                attempts=0,
                next_attempt_at=0.0,
                created_at=0.0,
            )
        )

    def downgrade(conn: sa.Connection) -> None:
        command.downgrade(schema._config(conn), "0109_i16_node_owner")

    async with db.write() as conn:
        await conn.run_sync(downgrade)
        ids = [r.id for r in await conn.execute(sa.text("SELECT id FROM webhooks"))]
        left = await conn.execute(sa.text("SELECT count(*) FROM webhook_deliveries"))
        assert (ids, left.scalar()) == (["plain"], 0)
