"""Which server owns a task or a tool call, so that start-up recovers only the rows of
servers that are gone (issue 10; see store/owners.py). NULL on rows from before.

Revision ID: 0102_i10_owners
Revises: 0101_i15_sandbox_columns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0102_i10_owners"
down_revision = "0101_i15_sandbox_columns"
branch_labels = None
depends_on = None

_TABLES = ("tasks", "tool_calls")


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("owner", sa.String(length=64), nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("owner")
