"""MCP client configurations, a new table (the hand-rolled migration "0003_i17_mcp_clients").

Revision ID: 0003_i17_mcp_clients
Revises: 0002_cron_tables
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_i17_mcp_clients"
down_revision = "0002_cron_tables"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcp_clients",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("secrets_encrypted", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    op.drop_table("mcp_clients")
