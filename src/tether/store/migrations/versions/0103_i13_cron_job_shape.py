"""Stored cron jobs take QwenPaw's job shape (task_type, text, request, dispatch, runtime,
meta); a data change only, done by ``tether.store.cron_shape``.

Revision ID: 0103_i13_cron_job_shape
Revises: 0102_i10_owners
"""

from __future__ import annotations

from alembic import op

from tether.store.cron_shape import migrate_cron_job_shape

revision = "0103_i13_cron_job_shape"
down_revision = "0102_i10_owners"
branch_labels = None
depends_on = None


def upgrade() -> None:
    migrate_cron_job_shape(op.get_bind())


def downgrade() -> None:
    # The old shape carried less (no dispatch, no runtime): there is no way back.
    raise NotImplementedError("cron jobs cannot go back to the shape before QwenPaw's")
