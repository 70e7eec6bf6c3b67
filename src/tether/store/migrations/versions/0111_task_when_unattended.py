"""Each task records the unattended policy it was started with (a cron job's own), so
that a task resumed after a restart keeps it instead of falling back to the session's.

Revision ID: 0111_task_when_unattended
Revises: 0110_webhook_url_sealed
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0111_task_when_unattended"
down_revision = "0110_webhook_url_sealed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("when_unattended", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("when_unattended")
