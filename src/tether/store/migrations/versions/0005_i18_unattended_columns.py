"""The similar pattern shown on an approval, the rule behind an audited decision, the
per-session unattended policy (the hand-rolled migration "0005_i18_unattended_columns").

Revision ID: 0005_i18_unattended_columns
Revises: 0004_i18_unattended_tables
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_i18_unattended_columns"
down_revision = "0004_i18_unattended_tables"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("similar_pattern", sa.JSON(), nullable=True))
    with op.batch_alter_table("governance_audit") as batch:
        batch.add_column(sa.Column("rule_id", sa.String(length=64), nullable=True))
    with op.batch_alter_table("chat_sessions") as batch:
        batch.add_column(sa.Column("when_unattended", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.drop_column("when_unattended")
    with op.batch_alter_table("governance_audit") as batch:
        batch.drop_column("rule_id")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("similar_pattern")
