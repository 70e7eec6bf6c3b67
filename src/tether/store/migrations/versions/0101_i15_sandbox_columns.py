"""What a call used (tool_calls.resources), a session's sandbox settings
(chat_sessions.sandbox) and the sandbox a decision was made for (governance_audit.sandbox).

Revision ID: 0101_i15_sandbox_columns
Revises: 0100_i16_nodes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0101_i15_sandbox_columns"
down_revision = "0100_i16_nodes"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("tool_calls", "resources"),
    ("chat_sessions", "sandbox"),
    ("governance_audit", "sandbox"),
)


def upgrade() -> None:
    for table, column in _COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column(column, sa.JSON(), nullable=True))


def downgrade() -> None:
    for table, column in reversed(_COLUMNS):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
