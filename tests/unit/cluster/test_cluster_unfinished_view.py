"""The view of every node's unfinished calls of a session that a node keeps between
changes, against a real Redis and a real store: a change committed by one node is seen
by the next list on every other, and an unchanged session costs the store nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from redis_support import drop_prefix, new_prefix, redis_url, require_redis
from tether.cluster import unfinished_view
from tether.cluster.redis_link import RedisLink
from tether.cluster.unfinished_view import UnfinishedView
from tether.store.database import Database
from tether.store.records import ToolCallRecord
from tether.store.toolcalls import ToolCallRepository


def call(call_id: str, session: str = "s") -> ToolCallRecord:
    return ToolCallRecord(
        call_id, session, None, "default", "shell", {}, "running", None, None, False, None,
        None, None, 1.0, None,
    )  # fmt: skip


class CountingRepo(ToolCallRepository):
    """The real repository, counting how often a session's unfinished calls are read."""

    reads = 0

    async def unfinished_in_session(self, session_id: str) -> list[ToolCallRecord]:
        self.reads += 1
        return await super().unfinished_in_session(session_id)


@pytest.fixture
async def link() -> AsyncIterator[RedisLink]:
    require_redis()
    prefix = new_prefix()
    link = await RedisLink.connect(redis_url(), prefix)
    try:
        yield link
    finally:
        await link.close()
        drop_prefix(prefix)


async def _node(db: Database, link: RedisLink, owner: str) -> tuple[CountingRepo, UnfinishedView]:
    repo = CountingRepo(db, owner)
    view = UnfinishedView(link, repo)
    repo.report_changes(view.changed)
    view.start()
    # Listening once the subscription is confirmed: from then on no change goes unheard.
    async with asyncio.timeout(10):
        while not view.listening:
            await asyncio.sleep(0.005)
    return repo, view


async def _until(view: UnfinishedView, session: str, ids: list[str]) -> None:
    async with asyncio.timeout(10):
        while [r.id for r in await view.in_session(session)] != ids:
            await asyncio.sleep(0.005)


async def test_a_change_on_one_node_reaches_the_next_list_on_another(
    db: Database, link: RedisLink, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kept for an hour: only the word from the other node can make a change show.
    monkeypatch.setattr(unfinished_view, "MAX_AGE_SECONDS", 3600.0)
    _, view_a = await _node(db, link, "node-a")
    repo_b, view_b = await _node(db, link, "node-b")
    try:
        assert await view_a.in_session("s") == []
        await repo_b.insert(call("c1"))
        await _until(view_a, "s", ["c1"])
        await repo_b.update("c1", session_id="s", status="offloaded", offload_reason="user")
        async with asyncio.timeout(10):
            while (await view_a.in_session("s"))[0].status != "offloaded":
                await asyncio.sleep(0.005)
        assert await repo_b.record_end("c1", session_id="s", end_state="completed")
        await _until(view_a, "s", [])
    finally:
        await view_a.close()
        await view_b.close()


async def test_an_unchanged_session_is_read_from_the_store_once(
    db: Database, link: RedisLink
) -> None:
    repo, view = await _node(db, link, "node-a")
    try:
        await repo.insert(call("c1"))
        await _until(view, "s", ["c1"])
        reads = repo.reads
        for _ in range(50):
            assert [r.id for r in await view.in_session("s")] == ["c1"]
        assert repo.reads == reads
        # A change to another session leaves this one kept; one to this session does not.
        await repo.insert(call("c2", session="other"))
        await view.in_session("s")
        assert repo.reads == reads
        await repo.insert(call("c3"))
        assert [r.id for r in await view.in_session("s")] == ["c1", "c3"]
        assert repo.reads == reads + 1
    finally:
        await view.close()


async def test_a_dead_nodes_calls_ended_are_forgotten_everywhere(
    db: Database, link: RedisLink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unfinished_view, "MAX_AGE_SECONDS", 3600.0)
    lost = ToolCallRepository(db, "node-lost")
    await lost.insert(call("c1", session="s1"))
    await lost.insert(call("c2", session="s2"))
    _, view_a = await _node(db, link, "node-a")
    repo_b, view_b = await _node(db, link, "node-b")
    try:
        await _until(view_a, "s1", ["c1"])
        await _until(view_a, "s2", ["c2"])
        # The survivor (b) ends the lost node's calls in one statement, any session.
        await repo_b.interrupt_unfinished("node lost", ["node-lost"], end_state="error")
        await _until(view_a, "s1", [])
        await _until(view_a, "s2", [])
    finally:
        await view_a.close()
        await view_b.close()


async def test_without_the_channel_every_list_reads_the_store(
    db: Database, link: RedisLink
) -> None:
    repo = CountingRepo(db, "node-a")
    view = UnfinishedView(link, repo)  # never started: it hears nothing
    await repo.insert(call("c1"))
    await view.in_session("s")
    await view.in_session("s")
    assert repo.reads == 2
