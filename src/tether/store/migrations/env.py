"""Alembic's entry point: runs the revisions on the connection Tether hands it.

Tether never lets Alembic open its own engine: `tether.store.schema` passes the
connection (inside the caller's transaction) as ``config.attributes["connection"]``,
so SQLite and PostgreSQL, sync and async engines, all go through one path.
"""

from __future__ import annotations

from alembic import context

from tether.store.tables import metadata

connection = context.config.attributes["connection"]
# Batch mode lets a revision alter or drop columns on SQLite (it copies the table).
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
