"""A database from before issue 18's migrations (and before Alembic) upgrades in place
and keeps its rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

from tether.store import schema
from tether.store.database import Database

# The tables issues 18, 14 and 15 change, as they were before, with a row each.
_OLD_SCHEMA = """
CREATE TABLE _migrations (name VARCHAR(200) PRIMARY KEY);
INSERT INTO _migrations VALUES ('0001_initial'), ('0002_cron_tables');
CREATE TABLE chat_sessions (
    id VARCHAR(512) PRIMARY KEY, user_id VARCHAR(512) NOT NULL, channel VARCHAR(64) NOT NULL,
    title TEXT, approval_level VARCHAR(16), created_at FLOAT NOT NULL, updated_at FLOAT NOT NULL
);
INSERT INTO chat_sessions VALUES ('s1', 'u', 'console', 'old', 'strict', 1.0, 2.0);
CREATE TABLE approvals (
    request_id VARCHAR(64) PRIMARY KEY, session_id VARCHAR(512) NOT NULL,
    tool_call_id VARCHAR(128) NOT NULL, tool_name VARCHAR(128) NOT NULL, arguments JSON NOT NULL,
    level VARCHAR(16) NOT NULL, findings JSON NOT NULL, status VARCHAR(16) NOT NULL,
    decided_by VARCHAR(32), reason TEXT, created_at FLOAT NOT NULL, expires_at FLOAT NOT NULL,
    decided_at FLOAT
);
CREATE TABLE tasks (
    id VARCHAR(64) PRIMARY KEY, session_id VARCHAR(512) NOT NULL, user_id VARCHAR(512) NOT NULL,
    status VARCHAR(16) NOT NULL, "trigger" VARCHAR(32) NOT NULL, approval_level VARCHAR(16),
    result JSON, created_at FLOAT NOT NULL, started_at FLOAT, finished_at FLOAT
);
INSERT INTO tasks VALUES ('t1', 's1', 'u', 'finished', 'user', NULL, NULL, 1.0, 1.0, 2.0);
CREATE TABLE tool_calls (
    id VARCHAR(128) PRIMARY KEY, session_id VARCHAR(512) NOT NULL, status VARCHAR(16) NOT NULL
);
INSERT INTO tool_calls VALUES ('c1', 's1', 'completed');
CREATE TABLE governance_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id VARCHAR(512) NOT NULL,
    tool_call_id VARCHAR(128) NOT NULL, tool_name VARCHAR(128) NOT NULL, arguments JSON NOT NULL,
    level VARCHAR(16) NOT NULL, findings JSON NOT NULL, verdict VARCHAR(8) NOT NULL,
    outcome VARCHAR(8) NOT NULL, decided_by VARCHAR(32) NOT NULL, reason TEXT,
    request_id VARCHAR(64), created_at FLOAT NOT NULL
);
"""


def _columns(path: Path, table: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


async def test_an_old_database_gains_the_new_tables_and_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(_OLD_SCHEMA)

    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.migrate()
    await db.migrate()  # a second upgrade changes nothing
    async with db.read() as conn:
        done = await conn.run_sync(schema.current_revision)
        session = (await conn.execute(sa.text("SELECT * FROM chat_sessions"))).one()
    await db.close()

    assert done == schema.head_revision()
    assert not _columns(path, "_migrations")
    assert "when_unattended" in _columns(path, "chat_sessions")
    assert "similar_pattern" in _columns(path, "approvals")
    assert "rule_id" in _columns(path, "governance_audit")
    assert "resources" in _columns(path, "tool_calls")
    assert "sandbox" in _columns(path, "chat_sessions") & _columns(path, "governance_audit")
    for table in ("remembered_rules", "webhooks", "webhook_deliveries", "webhook_attempts"):
        assert _columns(path, table), table
    assert (session.id, session.approval_level, session.when_unattended) == ("s1", "strict", None)


async def test_a_new_database_gets_everything_from_the_first_migration(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.migrate()
    await db.close()
    assert "when_unattended" in _columns(path, "chat_sessions")
    assert "rule_id" in _columns(path, "governance_audit")
