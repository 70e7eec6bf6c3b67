"""The nodes of a cluster and their leases (issue 16).

Revision ID: 0100_i16_nodes
Revises: 0014_i14_task_resumes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0100_i16_nodes"
down_revision = "0014_i14_task_resumes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("renewed_at", sa.Float(), nullable=False),
        sa.Column("live_calls", sa.Integer(), nullable=False),
        sa.Column("running_tasks", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("nodes")
