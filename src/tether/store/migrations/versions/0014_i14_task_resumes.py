"""Times a task was taken up again after a restart (the hand-rolled migration
"0014_i14_task_resumes").

Revision ID: 0014_i14_task_resumes
Revises: 0005_i18_unattended_columns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_i14_task_resumes"
down_revision = "0005_i18_unattended_columns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("resumes", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("resumes")
