"""What the webhook unit tests share: the real repository, watched, and one delivery's
run from notify to a chosen moment."""

from __future__ import annotations

import asyncio

from tether.store.database import Database
from tether.store.records import WebhookAttemptRecord, WebhookDeliveryRecord
from tether.store.webhooks import WebhookRepository
from tether.webhooks.egress import DEFAULT_DENIED, Egress, parse_networks
from tether.webhooks.service import WebhookService

#: The egress policy a server has by default.
DEFAULT_EGRESS = Egress(parse_networks(DEFAULT_DENIED))


class WatchedRepository(WebhookRepository):
    """The real repository, keeping what its claims came to and signalling when an
    attempt is being recorded, has been, and when a delivery is given up."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.claims: list[bool] = []
        self.claimed = asyncio.Event()
        self.recorded = asyncio.Event()
        self.gave_up = asyncio.Event()
        self.recording = asyncio.Event()
        #: Seconds each record of an attempt takes before it is written (a busy database).
        self.record_delay = 0.0

    async def claim(self, delivery: WebhookDeliveryRecord, until: float) -> bool:
        won = await super().claim(delivery, until)
        self.claims.append(won)
        self.claimed.set()
        return won

    async def record_attempt(
        self,
        attempt: WebhookAttemptRecord,
        status: str,
        next_attempt_at: float | None,
        finished_at: float | None,
    ) -> None:
        self.recording.set()
        if self.record_delay:
            await asyncio.sleep(self.record_delay)
        await super().record_attempt(attempt, status, next_attempt_at, finished_at)
        self.recorded.set()
        if status == "failed":
            self.gave_up.set()


async def notify_until(service: WebhookService, moment: asyncio.Event) -> None:
    """Start ``service``, report a `task.finished`, and shut it down once ``moment``
    has come (10 s at most)."""
    service.start()
    try:
        service.notify("task.finished", {"task_id": "t1"})
        await asyncio.wait_for(moment.wait(), 10)
    finally:
        await service.shutdown()
