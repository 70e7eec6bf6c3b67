"""Which node a session's turn runs on (session_turns), so that a session's turns never
overlap across nodes.

Revision ID: 0108_i16_session_turns
Revises: 0105_i16_call_deadlines
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0108_i16_session_turns"
down_revision = "0105_i16_call_deadlines"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_turns",
        sa.Column("session_id", sa.String(512), primary_key=True),
        sa.Column("task_id", sa.String(64), nullable=False),
        sa.Column("node_id", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("claimed_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("session_turns")
