"""A webhook's URL is sealed like its secret (it is often the receiver's credential):
``url_encrypted`` holds it, and ``url`` only its scheme and host. Existing rows are
sealed by the first server that reads them, which holds the key (the migration does
not). A downgrade cannot open the sealed URLs: it removes those webhooks (with their
deliveries), which would otherwise post to their listed form and fail every attempt;
they must be subscribed again.

Revision ID: 0110_webhook_url_sealed
Revises: 0109_i16_node_owner
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0110_webhook_url_sealed"
down_revision = "0109_i16_node_owner"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("url_encrypted", sa.Text(), nullable=True))


def downgrade() -> None:
    sealed = "SELECT id FROM webhooks WHERE url_encrypted IS NOT NULL"
    deliveries = f"SELECT id FROM webhook_deliveries WHERE webhook_id IN ({sealed})"
    op.execute(f"DELETE FROM webhook_attempts WHERE delivery_id IN ({deliveries})")
    op.execute(f"DELETE FROM webhook_deliveries WHERE webhook_id IN ({sealed})")
    op.execute("DELETE FROM webhooks WHERE url_encrypted IS NOT NULL")
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("url_encrypted")
