"""Webhooks on a store that several servers share (nodes of a cluster, or servers on one
database): a subscription made on one is seen, used and removable on the others."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tether.security.keybox import KeyBox
from tether.store.database import Database
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


def _node(db: Database, tmp_path: Path, receiver: Receiver) -> WebhookService:
    policy = RetryPolicy(first_delay=0.01, max_delay=0.02, give_up_after=5, timeout=1)
    keybox = KeyBox(tmp_path / "secret.key")  # the nodes share their key
    return WebhookService(WebhookRepository(db), keybox, policy, httpx.MockTransport(receiver))


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
