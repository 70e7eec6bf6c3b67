"""Webhook subscriptions, their persisted delivery queue and the log of every attempt."""

from __future__ import annotations

from dataclasses import replace

import sqlalchemy as sa

from tether.store.database import Database
from tether.store.records import WebhookAttemptRecord, WebhookDeliveryRecord, WebhookRecord
from tether.store.rows import record_values, to_record
from tether.store.tables import webhook_attempts, webhook_deliveries, webhooks


class WebhookRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    # ----------------------------------------------------------------- subscriptions

    async def add(self, record: WebhookRecord) -> None:
        async with self._db.write() as conn:
            await conn.execute(webhooks.insert().values(**record_values(record)))

    async def list_all(self) -> list[WebhookRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(sa.select(webhooks).order_by(webhooks.c.created_at))
            return [to_record(WebhookRecord, r) for r in rows]

    async def seal_url(self, webhook_id: str, url: str, url_encrypted: str) -> None:
        """Replace a row's plain URL (a row from before URLs were sealed) with its listed
        form ``url`` and its ciphertext; a row another node sealed first is left as it
        is."""
        async with self._db.write() as conn:
            await conn.execute(
                sa.update(webhooks)
                .where(webhooks.c.id == webhook_id, webhooks.c.url_encrypted.is_(None))
                .values(url=url, url_encrypted=url_encrypted)
            )

    async def update(self, webhook_id: str, **values: object) -> bool:
        """Write ``values`` (of ``url``, ``url_encrypted``, ``events``, ``description``)
        over the row, and only those: a change of one field never writes back another
        read earlier. False if the webhook is gone."""
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.update(webhooks).where(webhooks.c.id == webhook_id).values(**values)
            )
            return bool(result.rowcount == 1)

    async def delete(self, webhook_id: str) -> bool:
        """Remove a webhook with its deliveries and their attempts; False if unknown."""
        async with self._db.write() as conn:
            ids = sa.select(webhook_deliveries.c.id).where(
                webhook_deliveries.c.webhook_id == webhook_id
            )
            await conn.execute(
                sa.delete(webhook_attempts).where(webhook_attempts.c.delivery_id.in_(ids))
            )
            await conn.execute(
                sa.delete(webhook_deliveries).where(webhook_deliveries.c.webhook_id == webhook_id)
            )
            result = await conn.execute(sa.delete(webhooks).where(webhooks.c.id == webhook_id))
            return result.rowcount > 0

    # ----------------------------------------------------------------- deliveries

    async def enqueue(self, deliveries: list[WebhookDeliveryRecord]) -> None:
        if not deliveries:
            return
        async with self._db.write() as conn:
            await conn.execute(webhook_deliveries.insert(), [record_values(d) for d in deliveries])

    async def pending(self, limit: int) -> list[WebhookDeliveryRecord]:
        """Deliveries still to be made, the soonest due first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(webhook_deliveries)
                .where(webhook_deliveries.c.status == "pending")
                .order_by(webhook_deliveries.c.next_attempt_at)
                .limit(limit)
            )
            return [to_record(WebhookDeliveryRecord, r) for r in rows]

    async def claim(self, delivery: WebhookDeliveryRecord, until: float) -> bool:
        """Take ``delivery`` for its next attempt, unless another node took it since it was
        read: compare-and-set on its attempt count and due time, the latter moved to
        ``until``. That is a lease: a node that dies mid-attempt leaves the delivery due
        again then. True if this node has it."""
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.update(webhook_deliveries)
                .where(*_unchanged(delivery))
                .values(next_attempt_at=until)
            )
            return bool(result.rowcount == 1)

    async def release(self, delivery: WebhookDeliveryRecord, until: float) -> None:
        """Give back a claim (taken with ``until``) whose attempt never happened: the
        delivery is due again when it was before."""
        claimed = replace(delivery, next_attempt_at=until)
        async with self._db.write() as conn:
            await conn.execute(
                sa.update(webhook_deliveries)
                .where(*_unchanged(claimed))
                .values(next_attempt_at=delivery.next_attempt_at)
            )

    async def record_attempt(
        self,
        attempt: WebhookAttemptRecord,
        status: str,
        next_attempt_at: float | None,
        finished_at: float | None,
    ) -> None:
        """Log one attempt and move its delivery on, in one transaction. A failure moves
        only a pending delivery that has not recorded this attempt or a later one (another
        node may have, when this node's lease ran out in the middle of its attempt); a
        success moves any delivery not yet delivered, whatever the other attempts came
        to, and a delivered one stays so."""
        c = webhook_deliveries.c
        number = attempt.attempt
        if status == "delivered":
            # Whatever was recorded for this attempt or a later one: it was delivered.
            moved_on = c.status != "delivered"
            attempts: sa.ColumnElement[int] | int = sa.case(
                (c.attempts > number, c.attempts), else_=number
            )
        else:
            moved_on = sa.and_(c.status == "pending", c.attempts < number)
            attempts = number
        async with self._db.write() as conn:
            await conn.execute(webhook_attempts.insert().values(**record_values(attempt)))
            await conn.execute(
                sa.update(webhook_deliveries)
                .where(c.id == attempt.delivery_id, moved_on)
                .values(
                    status=status,
                    attempts=attempts,
                    next_attempt_at=next_attempt_at,
                    finished_at=finished_at,
                )
            )

    async def deliveries(
        self, webhook_id: str, limit: int
    ) -> list[tuple[WebhookDeliveryRecord, list[WebhookAttemptRecord]]]:
        """A webhook's deliveries, newest first, each with its attempts in order."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(webhook_deliveries)
                .where(webhook_deliveries.c.webhook_id == webhook_id)
                .order_by(webhook_deliveries.c.created_at.desc())
                .limit(limit)
            )
            found = [to_record(WebhookDeliveryRecord, r) for r in rows]
            attempts = await conn.execute(
                sa.select(webhook_attempts)
                .where(webhook_attempts.c.delivery_id.in_([d.id for d in found]))
                .order_by(webhook_attempts.c.id)
            )
            by_delivery: dict[str, list[WebhookAttemptRecord]] = {d.id: [] for d in found}
            for row in attempts:
                by_delivery[row.delivery_id].append(to_record(WebhookAttemptRecord, row))
            return [(d, by_delivery[d.id]) for d in found]


def _unchanged(delivery: WebhookDeliveryRecord) -> list[sa.ColumnElement[bool]]:
    """Conditions that hold while ``delivery``'s row is still pending as it was read."""
    c = webhook_deliveries.c
    due = delivery.next_attempt_at
    return [
        c.id == delivery.id,
        c.status == "pending",
        c.attempts == delivery.attempts,
        c.next_attempt_at.is_(None) if due is None else c.next_attempt_at == due,
    ]
