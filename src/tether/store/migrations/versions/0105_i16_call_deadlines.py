"""A live call's deadlines as epoch seconds (tool_calls.kill_at, tool_calls.offload_at),
so any node can show them for a call another node runs.

Revision ID: 0105_i16_call_deadlines
Revises: 0103_i13_cron_job_shape
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0105_i16_call_deadlines"
down_revision = "0103_i13_cron_job_shape"
branch_labels = None
depends_on = None

_COLUMNS = ("kill_at", "offload_at")


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        for column in _COLUMNS:
            batch.add_column(sa.Column(column, sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls") as batch:
        for column in reversed(_COLUMNS):
            batch.drop_column(column)
