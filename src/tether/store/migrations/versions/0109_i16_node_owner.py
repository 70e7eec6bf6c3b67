"""Each node's lease records the owner id of the process holding it, so that a dead
node's calls, tasks and cron runs (whose ``owner`` is that id) can be found and ended,
and an owner without a live lease is known to be gone (issue 16).

Revision ID: 0109_i16_node_owner
Revises: 0108_i16_session_turns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0109_i16_node_owner"
down_revision = "0108_i16_session_turns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("owner")
