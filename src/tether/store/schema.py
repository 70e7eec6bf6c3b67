"""The schema's version: Alembic revisions, and the bridge from the hand-rolled list.

Every function here takes a sync connection inside the caller's transaction (the async
engine runs them through ``run_sync``), so an upgrade commits whole or not at all (on
SQLite that transaction is opened explicitly: see ``Database._schema_transaction``).

Every start checks the schema, and nearly always finds it at ``HEAD_REVISION``: that
check reads one row. Alembic (about 0.1 s to import, and its walk over the revision
files) is loaded only to create, upgrade or explain.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from alembic.config import Config

UPGRADE_COMMAND = "tether db upgrade"
# The newest revision, as Alembic's chain in migrations/versions ends
# (test_store_schema holds the two equal: a new revision updates this line).
HEAD_REVISION = "0111_task_when_unattended"
_VERSION_TABLE = "alembic_version"

# Before Alembic, applied steps were recorded by name in this table; those names are
# the ids of the revisions that replaced them.
_LEGACY_TABLE = "_migrations"
# Any fixed number: PostgreSQL nodes starting together take turns on the schema.
_SCHEMA_LOCK_KEY = 0x7E7E_0016


class SchemaError(RuntimeError):
    """The database's schema is not the one this Tether runs on."""


def _config(conn: sa.Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("tether.store") / "migrations"))
    config.attributes["connection"] = conn
    return config


def _revisions_in_order(config: Config) -> list[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(config)
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def head_revision() -> str:
    """The revision this Tether's code expects."""
    return _revisions_in_order(_config())[-1]


def current_revision(conn: sa.Connection) -> str | None:
    """The revision the database is at (None: not under Alembic yet)."""
    if not sa.inspect(conn).has_table(_VERSION_TABLE):
        return None
    rows = conn.execute(sa.text(f"SELECT version_num FROM {_VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:
        raise SchemaError(
            f"the database records several schema revisions {sorted(rows)!r}; "
            "Tether's revisions form one chain, so it was changed by hand"
        )
    return rows[0] if rows else None


def _lock(conn: sa.Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SCHEMA_LOCK_KEY)))


def _adopt_legacy(conn: sa.Connection, config: Config) -> None:
    """Stamp a pre-Alembic database at the last step its `_migrations` recorded."""
    inspector = sa.inspect(conn)
    if not inspector.has_table(_LEGACY_TABLE) or current_revision(conn) is not None:
        return
    done = set(conn.execute(sa.text(f"SELECT name FROM {_LEGACY_TABLE}")).scalars())
    known = _revisions_in_order(config)
    unknown = sorted(done - set(known))
    if unknown:
        raise SchemaError(
            f"the database recorded migration(s) {unknown!r} this Tether does not know; "
            "it was written by a newer version"
        )
    # The hand-rolled list ran in order, so what it recorded is a prefix of the chain;
    # anything else means a revision was put between the old steps, which this stamp
    # would skip (or run twice).
    applied = known[: len(done)]
    if set(applied) != done:
        raise SchemaError(
            f"the database recorded steps {sorted(done)!r}, which are not the first "
            f"{len(done)} revisions {applied!r}; the revisions are out of order"
        )
    if applied:
        from alembic import command

        command.stamp(config, applied[-1])
    conn.execute(sa.text(f"DROP TABLE {_LEGACY_TABLE}"))


def upgrade(conn: sa.Connection, target: str = "head") -> None:
    """Bring the schema to ``target`` (default the newest revision), adopting a
    pre-Alembic database first."""
    _lock(conn)
    from alembic import command

    config = _config(conn)
    _adopt_legacy(conn, config)
    command.upgrade(config, target)


def _is_empty(conn: sa.Connection) -> bool:
    return not sa.inspect(conn).get_table_names()


def ensure_current(conn: sa.Connection) -> None:
    """Create the schema in an empty database; refuse one at any other revision.

    An existing database is never changed behind the operator's back: upgrading it is
    a step they take (after a backup), with ``tether db upgrade``.
    """
    _lock(conn)
    if _is_empty(conn):
        upgrade(conn)
        return
    current = current_revision(conn)
    if current == HEAD_REVISION:
        return
    known = _revisions_in_order(_config(conn))
    if current is not None and current not in known:
        raise SchemaError(
            f"the database schema is at revision {current!r}, newer than this Tether knows "
            f"(up to {known[-1]!r}); run the newer Tether"
        )
    at = repr(current) if current else "a version from before Alembic"
    raise SchemaError(
        f"the database schema is behind: it is at {at}, this Tether needs {known[-1]!r}. "
        f"Back it up, then run `{UPGRADE_COMMAND}`"
    )
