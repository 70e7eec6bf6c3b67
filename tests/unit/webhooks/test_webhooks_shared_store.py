"""Webhooks on a store that several servers share (nodes of a cluster, or servers on one
database): a subscription made on one is seen, used and removable on the others, and a
delivery both see due is made by one of them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from webhook_doubles import DEFAULT_EGRESS, WatchedRepository

from tether.security.keybox import KeyBox
from tether.store.database import Database
from tether.store.records import WebhookDeliveryRecord
from tether.store.webhooks import WebhookRepository
from tether.webhooks import service as webhook_service
from tether.webhooks.backoff import RetryPolicy
from tether.webhooks.service import WebhookNotFound, WebhookService

URL = "https://hooks.example/in"


class Receiver:
    """A receiver that answers 204 and counts what it got."""

    def __init__(self) -> None:
        self.got: list[str] = []
        self.arrived = asyncio.Event()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.got.append(request.headers["webhook-id"])
        self.arrived.set()
        return httpx.Response(204)


def _node(
    db: Database, tmp_path: Path, receiver: Receiver, repo: WebhookRepository | None = None
) -> WebhookService:
    policy = RetryPolicy(first_delay=0.01, max_delay=0.02, give_up_after=5, timeout=1)
    keybox = KeyBox(tmp_path / "secret.key")  # the nodes share their key
    repo = repo or WebhookRepository(db)
    return WebhookService(repo, keybox, policy, DEFAULT_EGRESS, httpx.MockTransport(receiver))


class RacingRepository(WatchedRepository):
    """One node's store, made to lose no race by luck: its worker holds the first due
    delivery it reads until every node has read it."""

    def __init__(self, db: Database, all_read: asyncio.Barrier) -> None:
        super().__init__(db)
        self._all_read = all_read
        self._held = False

    async def pending(self, limit: int) -> list[WebhookDeliveryRecord]:
        found = await super().pending(limit)
        if found and not self._held:
            self._held = True
            await self._all_read.wait()
        return found


async def test_a_webhook_made_on_one_node_serves_the_others(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = Receiver()
    a, b = _node(db, tmp_path, receiver), _node(db, tmp_path, receiver)
    await a.load()
    await b.load()  # b read the subscriptions before a made one
    hook, _secret = await a.create(URL, ["task.finished"], "")

    assert [h.id for h in await b.subscriptions()] == [hook.id]
    monkeypatch.setattr(webhook_service, "_FRESH_SECONDS", 0.0)  # b's view is old now
    b.start()
    try:
        b.notify("task.finished", {"task_id": "t1"})
        await asyncio.wait_for(receiver.arrived.wait(), 10)
    finally:
        await b.shutdown()
    assert len(receiver.got) == 1

    await b.delete(hook.id)
    with pytest.raises(WebhookNotFound):
        await a.deliveries(hook.id, 10)
    with pytest.raises(WebhookNotFound):
        await a.delete(hook.id)


async def test_a_delivery_two_nodes_see_due_is_made_by_one(db: Database, tmp_path: Path) -> None:
    receiver = Receiver()
    all_read = asyncio.Barrier(2)
    repos = [RacingRepository(db, all_read), RacingRepository(db, all_read)]
    a, b = (_node(db, tmp_path, receiver, repo) for repo in repos)
    await a.create(URL, ["task.finished"], "")
    a.notify("task.finished", {"task_id": "t1"})
    await a.shutdown()  # queued, not yet attempted: due on both nodes
    a, b = (_node(db, tmp_path, receiver, repo) for repo in repos)
    a.start()
    b.start()
    try:
        # Both read it due before either claimed it; each worker then tries once.
        for repo in repos:
            await asyncio.wait_for(repo.claimed.wait(), 10)
        winners = [repo for repo in repos if repo.claims == [True]]
        for repo in winners:
            await asyncio.wait_for(repo.recorded.wait(), 10)
    finally:
        await a.shutdown()
        await b.shutdown()
    assert len(receiver.got) == 1
    assert sorted(repo.claims for repo in repos) == [[False], [True]]
