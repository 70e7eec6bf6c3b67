"""Results of background (offloaded) calls waiting for their session's next turn."""

from __future__ import annotations

import time

import sqlalchemy as sa

from tether.store.database import Database
from tether.store.records import DeliveryRecord
from tether.store.rows import to_record
from tether.store.tables import deliveries

# Built once: every step of every turn asks.
_PENDING = (
    sa.select(deliveries)
    .where(
        deliveries.c.session_id == sa.bindparam("session_id"), deliveries.c.delivered_at.is_(None)
    )
    .order_by(deliveries.c.id)
)


class DeliveryRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, session_id: str, tool_call_id: str, content: str) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                deliveries.insert().values(
                    session_id=session_id,
                    tool_call_id=tool_call_id,
                    content=content,
                    created_at=time.time(),
                )
            )

    async def pending(self, session_id: str) -> list[DeliveryRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(_PENDING, {"session_id": session_id})
            return [to_record(DeliveryRecord, r) for r in rows]

    async def sessions_with_pending(self) -> list[str]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(deliveries.c.session_id)
                .where(deliveries.c.delivered_at.is_(None))
                .distinct()
            )
            return [r.session_id for r in rows]

    async def mark_delivered(self, ids: list[int]) -> None:
        if not ids:
            return
        async with self._db.write() as conn:
            await conn.execute(
                sa.update(deliveries)
                .where(deliveries.c.id.in_(ids))
                .values(delivered_at=time.time())
            )
