"""The database handle: engine, unit-of-work helpers and migrations."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from tether.store.cron_shape import migrate_cron_job_shape
from tether.store.sqlite_driver import OneHopDBAPI
from tether.store.tables import metadata
from tether.text import may_hold_surrogates, valid_data

Migration = Callable[[sa.Connection], None]


def _load_json(text: str) -> object:
    """JSON columns as read: valid Unicode even if an older version stored an escaped
    unpaired surrogate, so no stored value can break a read."""
    value = json.loads(text)
    return valid_data(value) if may_hold_surrogates(text) else value


def _create_missing_tables(conn: sa.Connection) -> None:
    metadata.create_all(conn, checkfirst=True)


def _add_missing_columns(*wanted: tuple[str, str]) -> Migration:
    """A migration adding (table, column) from the schema, unless the table has it.

    A database created after the column joined the schema got it from the first
    migration already; only an older one is altered.
    """

    def migrate(conn: sa.Connection) -> None:
        inspector = sa.inspect(conn)
        for table_name, column_name in wanted:
            present = {c["name"] for c in inspector.get_columns(table_name)}
            if column_name in present:
                continue
            column = metadata.tables[table_name].c[column_name]
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE {table_name} ADD COLUMN {column_name} {kind}"))

    return migrate


def _add_task_resumes(conn: sa.Connection) -> None:
    # Databases made by 0001 after this column was added already have it.
    columns = {c["name"] for c in sa.inspect(conn).get_columns("tasks")}
    if "resumes" not in columns:
        conn.execute(sa.text("ALTER TABLE tasks ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0"))


# Ordered, named migrations; each runs once and is recorded in `_migrations`. The first
# creates whatever tables are missing. Once a release has shipped, a change to an existing
# table is a new entry here with its own ALTER statements.
MIGRATIONS: list[tuple[str, Migration]] = [
    ("0001_initial", _create_missing_tables),
    # Databases created before the cron tables existed get them here.
    ("0002_cron_tables", _create_missing_tables),
    # MCP client configurations (a new table only).
    ("0003_i17_mcp_clients", _create_missing_tables),
    # Remembered decisions and webhooks (new tables), the similar pattern shown on an
    # approval, the rule behind an audited decision, the per-session unattended policy.
    ("0004_i18_unattended_tables", _create_missing_tables),
    (
        "0005_i18_unattended_columns",
        _add_missing_columns(
            ("approvals", "similar_pattern"),
            ("governance_audit", "rule_id"),
            ("chat_sessions", "when_unattended"),
        ),
    ),
    ("0014_i14_task_resumes", _add_task_resumes),
    # Cron jobs take QwenPaw's job shape (task_type, request, dispatch, runtime).
    ("0006_i13_cron_job_shape", migrate_cron_job_shape),
]

_migrations_table = sa.Table(
    "_migrations",
    sa.MetaData(),
    sa.Column("name", sa.String(200), primary_key=True),
)


def _apply_migrations(conn: sa.Connection) -> None:
    _migrations_table.create(conn, checkfirst=True)
    done = set(conn.execute(sa.select(_migrations_table.c.name)).scalars())
    for name, migrate in MIGRATIONS:
        if name in done:
            continue
        migrate(conn)
        conn.execute(_migrations_table.insert().values(name=name))


class Database:
    """One engine and the two ways to use it: ``read()`` and ``write()``.

    SQLite allows one writer at a time, so writes are serialised here with an asyncio
    lock rather than left to fail with "database is locked" under load.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        options: dict[str, Any] = {
            "pool_pre_ping": not self.is_sqlite,
            "json_deserializer": _load_json,
        }
        if url.startswith("sqlite+aiosqlite"):
            options["module"] = OneHopDBAPI()
        self.engine: AsyncEngine = create_async_engine(url, **options)
        if self.is_sqlite:
            sa.event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        self._write_lock = asyncio.Lock()

    async def migrate(self) -> None:
        """Bring the schema up to date."""
        if self.is_sqlite:
            path = self.url.split("///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
        async with self.engine.begin() as conn:
            await conn.run_sync(_apply_migrations)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for queries."""
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction: committed when the block ends, rolled back if it raises."""
        async with self._write_lock, self.engine.begin() as conn:
            yield conn

    async def close(self) -> None:
        """Release every pooled connection."""
        await self.engine.dispose()


def _sqlite_pragmas(dbapi_conn: object, _record: object) -> None:
    cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
