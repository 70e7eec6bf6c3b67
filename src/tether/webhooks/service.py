"""Webhook subscriptions and their delivery queue.

``notify`` never blocks or fails the caller: it only schedules the enqueueing of one
delivery per subscribed webhook. Deliveries are rows in the store, so a restart loses
none: the worker picks up whatever is pending. Each attempt is logged; a failure (an
answer other than 2xx, a timeout, no connection) is retried with exponential back-off
until the policy gives up. URLs and secrets never reach the log: attempts are logged by
webhook and delivery id, and errors by their type.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypedDict
from urllib.parse import urlsplit

import httpx

from tether.errors import Conflict, NotFound
from tether.security.keybox import KeyBox
from tether.security.secret_text import shown_url
from tether.store.records import WebhookAttemptRecord, WebhookDeliveryRecord, WebhookRecord
from tether.store.webhooks import WebhookRepository
from tether.waits import event_within, to_the_end
from tether.webhooks.address import InvalidWebhook, check_url
from tether.webhooks.backoff import RetryPolicy
from tether.webhooks.egress import SETTING, Egress
from tether.webhooks.events import EventType
from tether.webhooks.guarded_transport import DeniedAddress
from tether.webhooks.signing import new_secret, signed_headers

log = logging.getLogger(__name__)

_BATCH = 200
# Subscriptions are read again when older than this: another node (or another server on
# the same store) may have added or removed one.
_FRESH_SECONDS = 2.0
_MAX_IN_FLIGHT = 16
# A claimed delivery is left to its node for the policy's timeout and this much more
# (for the store's writes around the attempt); after that another node may make it.
_LEASE_MARGIN_SECONDS = 30.0
_USER_AGENT = "Tether-Webhooks"


class _UrlFields(TypedDict):
    """A record's URL fields (see address.py)."""

    url: str
    url_encrypted: str


class WebhookNotFound(NotFound):
    """No webhook has that id."""

    def __init__(self, webhook_id: str) -> None:
        super().__init__(f"webhook {webhook_id!r} not found")


def _message(event: EventType, data: dict[str, Any]) -> str:
    now = datetime.now(UTC).isoformat()
    return json.dumps({"type": event, "timestamp": now, "data": data}, default=str)


class WebhookService:
    """Registers webhooks, queues their deliveries and makes them."""

    def __init__(
        self,
        repo: WebhookRepository,
        keybox: KeyBox,
        policy: RetryPolicy,
        egress: Egress,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``transport``: where deliveries go instead of the network (tests); by default
        they go through ``egress``'s guard."""
        self._repo = repo
        self._keybox = keybox
        self.policy = policy
        self._egress = egress
        self._transport = transport
        self._hooks: dict[str, WebhookRecord] = {}
        self._loaded_at = -_FRESH_SECONDS
        # Changes made here so far (create, update, delete): see load.
        self._changes = 0
        # Rows from before URLs were sealed whose secret this server's key cannot open.
        self._unsealable: set[str] = set()
        self._wake = asyncio.Event()
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._enqueueing: set[asyncio.Task[None]] = set()
        self._worker: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None

    # ----------------------------------------------------------------- subscriptions

    async def load(self) -> None:
        """Read the subscriptions from the store (at start-up, and when they may have
        changed elsewhere). A read that a change here overtook is not taken as fresh:
        the next look reads again."""
        loaded_at, changes = time.monotonic(), self._changes
        hooks = await self._repo.list_all()
        self._hooks = {h.id: await self._sealed(h) for h in hooks}
        self._loaded_at = loaded_at if changes == self._changes else -_FRESH_SECONDS

    async def _sealed(self, hook: WebhookRecord) -> WebhookRecord:
        """``hook`` with its URL sealed: a row from before URLs were sealed is sealed in
        the store now (its plain URL replaced). Only with the key its secret was sealed
        with: a node holding another key (no TETHER_SECRET_KEY where the others have
        one) would have sealed the URL where no one could open it again."""
        if hook.url_encrypted is not None:
            return hook
        try:
            self._keybox.open(hook.secret_encrypted)
        except ValueError:
            if hook.id not in self._unsealable:  # once: the store is read every 2 s
                self._unsealable.add(hook.id)
                log.warning(
                    "webhook %s: its secret cannot be opened with this server's key; "
                    "its URL is left unsealed until a server with the right key reads it",
                    hook.id,
                )
            return hook
        fields = self._url_fields(hook.url)
        await self._repo.seal_url(hook.id, **fields)
        return replace(hook, **fields)

    def _url_fields(self, url: str) -> _UrlFields:
        """A record's URL fields for ``url``: its listed form, and itself sealed."""
        return {"url": shown_url(url), "url_encrypted": self._keybox.seal(url)}

    def _fresh(self) -> bool:
        return time.monotonic() - self._loaded_at < _FRESH_SECONDS

    async def subscriptions(self) -> list[WebhookRecord]:
        """Every webhook, oldest first (as the store has them now)."""
        await self.load()
        return list(self._hooks.values())

    async def get(self, webhook_id: str) -> WebhookRecord:
        """The webhook (the store is read again when this node's view is old, or does
        not know it)."""
        hook = self._hooks.get(webhook_id)
        if hook is None or not self._fresh():
            await self.load()
            hook = self._hooks.get(webhook_id)
        if hook is None:
            raise WebhookNotFound(webhook_id)
        return hook

    async def create(
        self, url: str, events: Sequence[EventType], description: str
    ) -> tuple[WebhookRecord, str]:
        """Subscribe ``url``; returns the webhook and its signing secret (shown once)."""
        secret = new_secret()
        url = self._allowed(check_url(url))
        record = WebhookRecord(
            id=f"wh-{uuid.uuid4().hex[:16]}",
            events=sorted(set(events)),
            description=description,
            secret_encrypted=self._keybox.seal(secret),
            created_at=time.time(),
            **self._url_fields(url),
        )
        self._changes += 1
        await self._repo.add(record)
        self._hooks[record.id] = record
        return record, secret

    async def update(
        self,
        webhook_id: str,
        url: str | None = None,
        events: Sequence[EventType] | None = None,
        description: str | None = None,
    ) -> WebhookRecord:
        """Change what is given of a webhook's URL, events and description; its secret
        and its deliveries stay (one still pending is made to the new URL from its next
        attempt). Raises WebhookNotFound, InvalidWebhook."""
        hook = await self.get(webhook_id)
        values: dict[str, object] = {}
        if url is not None:
            self._opens(hook)
            values.update(self._url_fields(self._allowed(check_url(url))))
        if events is not None:
            values["events"] = sorted(set(events))
        if description is not None:
            values["description"] = description
        self._changes += 1
        if not await self._repo.update(webhook_id, **values):
            self._hooks.pop(webhook_id, None)
            raise WebhookNotFound(webhook_id)
        await self.load()  # the row as written, with whatever another change left
        return await self.get(webhook_id)

    def _opens(self, hook: WebhookRecord) -> None:
        """Refuse to seal a URL with a key that does not open the webhook's secret (see
        _sealed): the servers holding the right key could not open it."""
        try:
            self._keybox.open(hook.secret_encrypted)
        except ValueError:
            raise Conflict(
                f"webhook {hook.id}: this server's key cannot open its secret; change its "
                "URL on a server holding the key it was made with (TETHER_SECRET_KEY)"
            ) from None

    def _allowed(self, url: str) -> str:
        host = urlsplit(url).hostname or ""
        if self._egress.denies_host(host):
            raise InvalidWebhook(f"url's address is in a network {SETTING} denies", field="url")
        return url

    async def delete(self, webhook_id: str) -> None:
        """Unsubscribe; its pending deliveries are dropped. Raises WebhookNotFound."""
        self._changes += 1
        self._hooks.pop(webhook_id, None)
        if not await self._repo.delete(webhook_id):
            raise WebhookNotFound(webhook_id)

    async def deliveries(
        self, webhook_id: str, limit: int
    ) -> list[tuple[WebhookDeliveryRecord, list[WebhookAttemptRecord]]]:
        await self.get(webhook_id)
        return await self._repo.deliveries(webhook_id, limit)

    # ----------------------------------------------------------------- notifying

    def notify(self, event: EventType, data: dict[str, Any]) -> None:
        """Queue ``event`` for every webhook subscribed to it; returns at once."""
        if self._fresh() and not any(event in h.events for h in self._hooks.values()):
            return
        body = _message(event, data)
        task = asyncio.get_running_loop().create_task(self._enqueue(event, body))
        self._enqueueing.add(task)
        task.add_done_callback(self._enqueueing.discard)

    async def _enqueue(self, event: EventType, body: str) -> None:
        if not self._fresh():
            try:
                await self.load()
            except Exception:
                log.exception("reading the webhooks failed; using the ones known here")
        targets = [h.id for h in self._hooks.values() if event in h.events]
        if not targets:
            return
        now = time.time()
        deliveries = [
            WebhookDeliveryRecord(
                id=f"msg_{uuid.uuid4().hex}",
                webhook_id=webhook_id,
                event=event,
                body=body,
                status="pending",
                attempts=0,
                next_attempt_at=now,
                created_at=now,
                finished_at=None,
            )
            for webhook_id in targets
        ]
        try:
            await self._repo.enqueue(deliveries)
        except Exception:
            log.exception("queueing a %s webhook delivery failed", event)
            return
        self._wake.set()

    # ----------------------------------------------------------------- delivering

    def start(self) -> None:
        """Start the delivery worker (pending deliveries of an earlier run included)."""
        self._client = httpx.AsyncClient(
            transport=self._transport or self._egress.transport(),
            timeout=self.policy.timeout,
            follow_redirects=False,
            headers={"user-agent": _USER_AGENT},
        )
        self._worker = asyncio.create_task(self._run())

    async def shutdown(self) -> None:
        """Queue what was notified, stop delivering; what is pending is kept for the
        next start."""
        if self._enqueueing:
            await asyncio.wait(set(self._enqueueing))
        tasks = [t for t in (self._worker, *self._in_flight.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        if self._client is not None:
            await self._client.aclose()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                delay = await self._start_due()
            except Exception:
                log.exception("the webhook delivery worker failed; retrying")
                delay = self.policy.first_delay
            await event_within(self._wake, delay)

    async def _start_due(self) -> float | None:
        """Start every due delivery; returns how long until the next one (None: none)."""
        now = time.time()
        waiting: list[float] = []
        for delivery in await self._repo.pending(_BATCH):
            if delivery.id in self._in_flight:
                continue
            due = delivery.next_attempt_at or now
            if due > now or len(self._in_flight) >= _MAX_IN_FLIGHT:
                waiting.append(max(due - now, 0.0))
                continue
            task = asyncio.create_task(self._attempt(delivery))
            self._in_flight[delivery.id] = task
            task.add_done_callback(self._attempt_done)
        return min(waiting) if waiting else None

    def _attempt_done(self, task: asyncio.Task[None]) -> None:
        for key, running in list(self._in_flight.items()):
            if running is task:
                del self._in_flight[key]
        self._wake.set()

    async def _attempt(self, delivery: WebhookDeliveryRecord) -> None:
        try:
            hook = await self.get(delivery.webhook_id)
        except WebhookNotFound:
            return  # unsubscribed meanwhile: its deliveries are gone with it
        if self._client is None:
            return
        lease = time.time() + self.policy.timeout + _LEASE_MARGIN_SECONDS
        number = delivery.attempts + 1
        try:
            if not await self._repo.claim(delivery, lease):
                return  # another node is making this attempt
            started, clock = time.time(), time.monotonic()
            status_code, error = await self._post(hook, delivery)
        except asyncio.CancelledError:
            # Shutting down (a claim cancelled may still have been committed): the next
            # start, or another node, makes it at once. A compare-and-set, so a claim
            # that was not made is left alone.
            await self._release(delivery, lease)
            raise
        attempt = WebhookAttemptRecord(
            delivery.id, number, started, time.monotonic() - clock, status_code, error
        )
        # The attempt was made: its outcome is kept through a shutdown (cut short, the
        # delivery stayed claimed, and a start within the lease left it untried).
        await to_the_end(self._record(hook, delivery, attempt))

    async def _record(
        self, hook: WebhookRecord, delivery: WebhookDeliveryRecord, attempt: WebhookAttemptRecord
    ) -> None:
        now = time.time()
        if attempt.error is None:
            await self._repo.record_attempt(attempt, "delivered", None, now)
            return
        retry_at = self.policy.next_attempt(delivery.created_at, now, attempt.attempt)
        log.warning(
            "webhook %s delivery %s attempt %d failed (%s)%s",
            hook.id,
            delivery.id,
            attempt.attempt,
            attempt.error,
            "" if retry_at is not None else "; giving up",
        )
        status = "pending" if retry_at is not None else "failed"
        await self._repo.record_attempt(attempt, status, retry_at, None if retry_at else now)

    async def _release(self, delivery: WebhookDeliveryRecord, lease: float) -> None:
        try:
            await self._repo.release(delivery, lease)
        except Exception:
            log.exception(
                "giving back webhook delivery %s failed; due again at its lease's end", delivery.id
            )

    async def _post(
        self, hook: WebhookRecord, delivery: WebhookDeliveryRecord
    ) -> tuple[int | None, str | None]:
        """(status code, error); error is None for a 2xx answer. The policy's timeout
        bounds the whole attempt, not only each read: a receiver that drips its answer
        cannot hold a delivery slot (or outlast the lease)."""
        assert self._client is not None
        try:
            secret = self._keybox.open(hook.secret_encrypted)
            # A row left unsealed (see _sealed) still holds its URL in plain text.
            url = hook.url if hook.url_encrypted is None else self._keybox.open(hook.url_encrypted)
            headers = signed_headers(secret, delivery.id, int(time.time()), delivery.body)
            async with (
                asyncio.timeout(self.policy.timeout),
                # Streamed and never read: only the status counts, and a receiver that
                # answers gigabytes cannot fill the server's memory.
                self._client.stream("POST", url, content=delivery.body, headers=headers) as resp,
            ):
                status_code = resp.status_code
        except (httpx.TimeoutException, TimeoutError):
            return None, "timeout"
        except Exception as exc:
            if isinstance(exc.__cause__, DeniedAddress):
                return None, f"address denied by {SETTING}"
            # The type only: an httpx message may quote the URL. Any failure is an
            # attempt recorded (an unrecorded one was claimed again for ever).
            return None, type(exc).__name__
        if 200 <= status_code < 300:
            return status_code, None
        return status_code, f"HTTP {status_code}"
