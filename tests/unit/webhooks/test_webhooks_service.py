"""The delivery queue against httpx.MockTransport and a real SQLite store: nothing is
queued without a subscriber, a receiver that keeps failing is given up on after the
policy's limit, one that never answers is cut off at the timeout, an attempt cut short
by a shutdown is due again at once, and no URL or secret reaches the log."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import httpx
import pytest
from webhook_doubles import DEFAULT_EGRESS, WatchedRepository, notify_until

from tether.security.keybox import KeyBox
from tether.store.database import Database
from tether.store.records import WebhookAttemptRecord, WebhookDeliveryRecord
from tether.store.webhooks import WebhookRepository
from tether.webhooks.backoff import RetryPolicy
from tether.webhooks.service import WebhookService

URL = "https://hooks.example/in?token=very-private"


class Failing:
    """A transport whose receiver is down; it counts the attempts."""

    def __init__(self) -> None:
        self.attempts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.attempts += 1
        raise httpx.ConnectError(f"cannot connect to {request.url}", request=request)


class Silent:
    """A receiver that takes the request and never answers."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def _service(
    repo: WebhookRepository, tmp_path: Path, transport: Failing | Silent, timeout: float = 1
) -> WebhookService:
    policy = RetryPolicy(first_delay=0.01, max_delay=0.02, give_up_after=0.1, timeout=timeout)
    keybox = KeyBox(tmp_path / "secret.key")
    return WebhookService(repo, keybox, policy, DEFAULT_EGRESS, httpx.MockTransport(transport))


async def test_only_subscribed_events_are_queued(repo: WatchedRepository, tmp_path: Path) -> None:
    service = _service(repo, tmp_path, Failing())
    await service.create(URL, ["task.finished"], "")
    service.notify("approval.requested", {"x": 1})
    await service.shutdown()  # waits for whatever notify queued
    assert await repo.pending(10) == []
    service.notify("task.finished", {"x": 1})
    await service.shutdown()
    (queued,) = await repo.pending(10)
    assert queued.event == "task.finished"


async def test_a_failing_receiver_is_given_up_on_and_never_named_in_the_log(
    repo: WatchedRepository, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    transport = Failing()
    service = _service(repo, tmp_path, transport)
    hook, secret = await service.create(URL, ["task.finished"], "ops")
    caplog.set_level(logging.INFO)
    await notify_until(service, repo.gave_up)

    ((delivery, attempts),) = await repo.deliveries(hook.id, 10)
    assert delivery.status == "failed"
    assert delivery.attempts == len(attempts) == transport.attempts >= 2
    assert {a.error for a in attempts} == {"ConnectError"}
    assert all(a.status_code is None for a in attempts)
    assert "giving up" in caplog.text
    assert "hooks.example" not in caplog.text
    assert "very-private" not in caplog.text
    assert secret not in caplog.text


async def test_a_receiver_that_never_answers_is_cut_off_at_the_timeout(
    repo: WatchedRepository, tmp_path: Path
) -> None:
    # httpx's timeout bounds each read, so a receiver that drips (or, through a mock
    # transport, one that never answers) would hold its slot for ever without a bound
    # on the whole attempt.
    service = _service(repo, tmp_path, Silent(), timeout=0.2)
    hook, _secret = await service.create(URL, ["task.finished"], "")
    await notify_until(service, repo.gave_up)
    ((delivery, attempts),) = await repo.deliveries(hook.id, 10)
    assert [(a.status_code, a.error) for a in attempts] == [(None, "timeout")]
    assert delivery.status == "failed"


async def test_an_attempt_cut_short_by_a_shutdown_is_due_again_at_once(
    repo: WatchedRepository, tmp_path: Path
) -> None:
    receiver = Silent()
    service = _service(repo, tmp_path, receiver, timeout=60)
    await service.create(URL, ["task.finished"], "")
    await notify_until(service, receiver.arrived)
    (delivery,) = await repo.pending(10)
    # Not held for the attempt's lease (the timeout and more): the next start makes it.
    assert delivery.attempts == 0
    assert delivery.next_attempt_at is not None and delivery.next_attempt_at <= time.time()


class StalledAfterClaim(WatchedRepository):
    """Its claims are committed, then the claimer is held there (where a shutdown may
    find it)."""

    async def claim(self, delivery: WebhookDeliveryRecord, until: float) -> bool:
        won = await super().claim(delivery, until)
        await asyncio.Event().wait()
        return won


async def test_a_claim_cut_short_by_a_shutdown_is_given_back(db: Database, tmp_path: Path) -> None:
    repo = StalledAfterClaim(db)
    service = _service(repo, tmp_path, Failing(), timeout=60)
    await service.create(URL, ["task.finished"], "")
    await notify_until(service, repo.claimed)
    (delivery,) = await repo.pending(10)
    assert delivery.attempts == 0
    assert delivery.next_attempt_at is not None and delivery.next_attempt_at <= time.time()


async def test_an_attempt_being_recorded_at_a_shutdown_is_recorded(
    repo: WatchedRepository, tmp_path: Path
) -> None:
    """Cut short there, the delivery stayed claimed for the lease (the policy's timeout
    and more), and a server started again within it did not try it (red CI on
    PostgreSQL: a restart test's receiver waited 20 s in vain)."""
    repo.record_delay = 0.05  # a busy database: the shutdown comes while it records
    service = _service(repo, tmp_path, Failing(), timeout=60)
    await service.create(URL, ["task.finished"], "")
    await notify_until(service, repo.recording)
    (delivery,) = await repo.pending(10)
    assert delivery.attempts == 1
    assert delivery.next_attempt_at is not None and delivery.next_attempt_at <= time.time() + 1


async def test_a_success_stands_whatever_another_node_recorded_for_that_attempt(
    repo: WatchedRepository,
) -> None:
    # Nodes whose leases ran out in the middle of their attempts record them late.
    now = time.time()
    await repo.enqueue(
        [
            WebhookDeliveryRecord(
                "msg_1", "wh-1", "task.finished", "{}", "pending", 0, now, now, None
            )
        ]
    )

    def attempt(number: int, status_code: int) -> WebhookAttemptRecord:
        error = None if status_code < 300 else f"HTTP {status_code}"
        return WebhookAttemptRecord("msg_1", number, now, 0.1, status_code, error)

    await repo.record_attempt(attempt(1, 500), "pending", now + 5, None)
    await repo.record_attempt(attempt(2, 500), "pending", now + 10, None)  # another node
    await repo.record_attempt(attempt(1, 204), "delivered", None, now)  # late, and true
    await repo.record_attempt(attempt(2, 500), "pending", now + 5, None)  # late again
    await repo.record_attempt(attempt(3, 500), "failed", None, now)
    ((delivery, attempts),) = await repo.deliveries("wh-1", 10)
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("delivered", 2, None)
    assert [a.status_code for a in attempts] == [500, 500, 204, 500, 500]


async def test_a_pending_delivery_goes_to_a_changed_url_from_its_next_attempt(
    repo: WatchedRepository, tmp_path: Path
) -> None:
    moved = "https://moved.example/in?token=also-private"
    asked: list[str] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200 if str(request.url) == moved else 503)

    policy = RetryPolicy(first_delay=0.01, max_delay=0.02, give_up_after=30, timeout=1)
    service = WebhookService(
        repo, KeyBox(tmp_path / "k"), policy, DEFAULT_EGRESS, httpx.MockTransport(receiver)
    )
    hook, _secret = await service.create(URL, ["task.finished"], "")
    service.start()
    try:
        service.notify("task.finished", {"task_id": "t1"})
        await asyncio.wait_for(repo.recorded.wait(), 10)
        changed = await service.update(hook.id, url=moved)
        assert changed.url == "https://moved.example/…"
        while True:
            repo.recorded.clear()  # before the look: a record made after it is waited for
            if (await repo.deliveries(hook.id, 1))[0][0].status != "pending":
                break
            await asyncio.wait_for(repo.recorded.wait(), 10)
    finally:
        await service.shutdown()
    ((delivery, attempts),) = await repo.deliveries(hook.id, 10)
    assert delivery.status == "delivered"
    assert [a.status_code for a in attempts][-1] == 200
    assert set(asked) == {URL, moved}
    assert asked.index(moved) == len(asked) - 1
