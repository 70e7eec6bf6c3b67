"""The Redis side of the cluster against a real Redis: live output streams keyed by
chunk number, and requests between nodes with their answers and errors."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from redis_support import (
    OwnRedis,
    drop_prefix,
    keys_under,
    new_prefix,
    redis_url,
    require_redis,
)
from tether.cluster.node_requests import NodeRequests
from tether.cluster.output_streams import OutputStreams
from tether.cluster.redis_link import RedisLink, shown_redis_url
from tether.cluster.signed import request_key, sign
from tether.errors import Conflict, NotAnswering, NotFound, Unavailable
from tether.store.records import OutputChunk


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


async def test_a_stream_resumes_after_any_chunk_and_ends(link: RedisLink) -> None:
    streams = OutputStreams(link)
    streams.start()
    for seq in range(1, 6):
        streams.chunk("call_a", OutputChunk(seq, "stdout", f"line {seq}\n"))
    # An adopted call replays its output from the start: chunks already sent are skipped.
    streams.chunk("call_a", OutputChunk(2, "stdout", "line 2\n"))
    streams.ended("call_a", 5)
    await streams.close()
    read = await streams.read("call_a", 2)
    assert [c.seq for c in read.chunks] == [3, 4, 5]
    assert read.ended
    everything = await streams.read("call_a", 0)
    assert "".join(c.text for c in everything.chunks) == "".join(f"line {n}\n" for n in range(1, 6))
    # The stream of an ended call expires: it is a live copy, the store keeps the output.
    ttl = await link.client.ttl(streams.key("call_a"))
    assert 0 < ttl <= 600


async def test_a_blocking_read_wakes_for_the_next_chunk(link: RedisLink) -> None:
    streams = OutputStreams(link)
    streams.start()
    try:
        reader = asyncio.create_task(streams.read("call_b", 0, block_ms=5000))
        await asyncio.sleep(0)  # the reader is waiting before the chunk exists
        started = time.monotonic()
        streams.chunk("call_b", OutputChunk(1, "stderr", "boom"))
        read = await reader
        assert time.monotonic() - started < 4
        assert read.chunks == [OutputChunk(1, "stderr", "boom")]
        assert not read.ended
        nothing = await streams.read("call_b", 1, block_ms=50)
        assert nothing.chunks == [] and not nothing.ended
    finally:
        await streams.close()


KEY = request_key("the cluster's shared secret key")


async def _serving(link: RedisLink, owner: str, timeout: float = 2.0) -> NodeRequests:
    requests = NodeRequests(link, owner, timeout, KEY)
    requests.start()
    return requests


async def test_a_request_is_carried_out_by_its_owner_and_answered(link: RedisLink) -> None:
    seen: list[dict[str, Any]] = []

    async def cancel(args: dict[str, Any]) -> dict[str, Any]:
        seen.append(args)
        return {"cancelled": args["call_id"]}

    owner = await _serving(link, "owner-1")
    owner.handle("call.cancel", cancel)
    asker = NodeRequests(link, "owner-2", 2.0, KEY)
    try:
        result = await asker.ask("owner-1", "call.cancel", {"call_id": "c1"}, "tool call c1")
        assert result == {"cancelled": "c1"}
        assert seen == [{"call_id": "c1"}]
    finally:
        await owner.close()


async def test_the_owners_error_kinds_are_raised_on_the_asking_side(link: RedisLink) -> None:
    async def not_found(args: dict[str, Any]) -> None:
        raise NotFound("no such call")

    async def conflict(args: dict[str, Any]) -> None:
        raise Conflict("the tool call has already completed")

    async def bug(args: dict[str, Any]) -> None:
        raise RuntimeError("internal detail")

    owner = await _serving(link, "owner-1")
    for name, handler in (("nf", not_found), ("cf", conflict), ("bug", bug)):
        owner.handle(name, handler)
    asker = NodeRequests(link, "owner-2", 2.0, KEY)
    try:
        with pytest.raises(NotFound, match="no such call"):
            await asker.ask("owner-1", "nf", {}, "x")
        with pytest.raises(Conflict, match="already completed"):
            await asker.ask("owner-1", "cf", {}, "x")
        with pytest.raises(Unavailable, match="failed"):
            await asker.ask("owner-1", "bug", {}, "x")
        with pytest.raises(Unavailable, match="does not know"):
            await asker.ask("owner-1", "no-such-action", {}, "x")
    finally:
        await owner.close()


async def test_an_answer_timeout_past_the_clients_socket_timeout_is_still_a_503() -> None:
    """redis-py 8 reads with a 5 s socket timeout by default: a node that did not answer
    within TETHER_NODE_ANSWER_SECONDS=5 (the default) or more was a 500 (the client's
    TimeoutError). The same, scaled down: a 0.4 s socket timeout, a 1 s answer."""
    require_redis()
    import redis.asyncio as aioredis

    prefix = new_prefix()
    client = aioredis.from_url(redis_url(), decode_responses=True, socket_timeout=0.4)
    try:
        asker = NodeRequests(RedisLink(client, prefix), "owner-3", 1.0, KEY)
        started = time.monotonic()
        with pytest.raises(NotAnswering, match=re.escape("did not answer within 1 s")):
            await asker.ask("owner-frozen", "act", {}, "tool call c8")
        assert time.monotonic() - started >= 1.0
    finally:
        await client.aclose()
        drop_prefix(prefix)


async def test_no_answer_in_time_is_503_and_the_late_request_is_dropped(
    link: RedisLink, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "tether.cluster.node_requests")
    ran: list[str] = []

    async def act(args: dict[str, Any]) -> None:
        ran.append("ran")

    asker = NodeRequests(link, "owner-2", 0.3, KEY)
    with pytest.raises(NotAnswering, match=re.escape("tool call c9 did not answer within 0.3 s")):
        await asker.ask("owner-late", "act", {}, "tool call c9")
    # The owner comes back after its asker gave up: the request is not carried out.
    owner = await _serving(link, "owner-late")
    owner.handle("act", act)
    try:
        deadline = time.monotonic() + 5
        while "dropped a act request" not in caplog.text:
            assert time.monotonic() < deadline, "the owner never dropped the late request"
            await asyncio.sleep(0.02)
        assert ran == []
    finally:
        await owner.close()
    assert all(k.startswith(link.prefix) for k in keys_under(link.prefix))


def test_a_redis_password_is_never_shown() -> None:
    assert shown_redis_url("redis://:s3cret@redis.internal:6379/0") == (
        "redis://***@redis.internal:6379/0"
    )
    assert shown_redis_url("redis://app:s3cret@h:6379") == "redis://app:***@h:6379"
    assert shown_redis_url("redis://h:6379/0") == "redis://h:6379/0"


async def test_an_unreachable_redis_is_a_clear_error() -> None:
    with pytest.raises(Unavailable, match=re.escape("cannot reach Redis at redis://127.0.0.1:1/0")):
        await RedisLink.connect("redis://127.0.0.1:1/0", "x")


async def test_a_request_not_signed_by_the_cluster_is_dropped(
    link: RedisLink, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "tether.cluster.node_requests")
    ran: list[dict[str, Any]] = []

    async def approve(args: dict[str, Any]) -> None:
        ran.append(args)

    owner = await _serving(link, "owner-1")
    owner.handle("approval.resolve", approve)
    queue = link.key("owner", "owner-1", "requests")
    message = {
        "id": "x",
        "action": "approval.resolve",
        "args": {"request_id": "r1", "approve": True},
        "answer_to": link.key("answer", "x"),
        "give_up_at": time.time() + 30,
    }
    try:
        # Whoever can write to Redis, without the key: plain JSON, then another key.
        await link.client.lpush(queue, json.dumps(message))
        await link.client.lpush(queue, sign(request_key("another key"), message))
        deadline = time.monotonic() + 5
        while caplog.text.count("not signed by a node of this cluster") < 2:
            assert time.monotonic() < deadline, "the forged requests were not dropped"
            await asyncio.sleep(0.02)
        assert ran == []
        assert await link.client.llen(link.key("answer", "x")) == 0
    finally:
        await owner.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    """A Redis this test may pause and stop (never the shared one)."""
    with OwnRedis.running(tmp_path / "redis") as server:
        yield server


@contextlib.asynccontextmanager
async def _owner_and_asker(
    url: str, timeout: float
) -> AsyncIterator[tuple[NodeRequests, NodeRequests, list[Any]]]:
    """An owner ("owner-1") serving ``act``, which records its argument ``n``, and an
    asker, each on a connection of its own with ``timeout``: the owner, the asker, and
    what the owner carried out."""
    prefix = new_prefix()
    ran: list[Any] = []

    async def act(args: dict[str, Any]) -> Any:
        ran.append(args["n"])
        return args["n"]

    owner_link = await RedisLink.connect(url, prefix)
    asker_link = await RedisLink.connect(url, prefix)
    owner = NodeRequests(owner_link, "owner-1", timeout, KEY)
    owner.handle("act", act)
    owner.start()
    try:
        yield owner, NodeRequests(asker_link, "owner-2", timeout, KEY), ran
    finally:
        await owner.close()
        await owner_link.close()
        await asker_link.close()


async def test_an_ask_keeps_to_one_deadline_while_redis_stalls(own_redis: OwnRedis) -> None:
    """The deadline was taken before the request was handed to Redis, and the wait for
    the answer had a full one of its own after that: a stall past the deadline (but
    short of the client's 5 s socket timeout) was a 503 after the stall and another full
    wait, and the request reached its owner with its time already spent."""
    async with _owner_and_asker(own_redis.url, 2.0) as (_owner, asker, ran):
        # A stall over well within the deadline: the request goes through.
        own_redis.pause(500)
        assert await asker.ask("owner-1", "act", {"n": 1}, "tool call c1") == 1

        # A stall past it: a clear 502 (Unavailable) once the deadline has passed.
        own_redis.pause(3500)
        started = time.monotonic()
        stalled = "could not ask the node that holds tool call c2: Redis did not answer"
        with pytest.raises(Unavailable, match=stalled):
            await asker.ask("owner-1", "act", {"n": 2}, "tool call c2")
        assert time.monotonic() - started < 3.0

        # Redis back: the owner reads its requests in order, and drops the one its asker
        # gave up on if it reached Redis at all.
        await asyncio.to_thread(own_redis.answers)
        assert await asker.ask("owner-1", "act", {"n": 3}, "tool call c3") == 3
        assert ran == [1, 3]


async def test_an_owner_that_cannot_answer_says_so_and_serves_on(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis gone between reading a request and writing its answer: the write's error
    escaped the task answering the request (asyncio's "exception was never retrieved"
    at best, with nothing in the node's log saying what was done)."""
    caplog.set_level(logging.WARNING, "tether.cluster.node_requests")
    unhandled: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: unhandled.append(context))
    async with _owner_and_asker(own_redis.url, 2.0) as (owner, asker, ran):

        async def cancel_as_redis_dies(args: dict[str, Any]) -> None:
            ran.append("cancel")
            own_redis.stop()

        owner.handle("call.cancel", cancel_as_redis_dies)
        # The asker is told it could not hear back, not that nothing happened.
        unheard = "could not hear whether the node that holds tool call c1 carried"
        with pytest.raises(Unavailable, match=unheard):
            await asker.ask("owner-1", "call.cancel", {}, "tool call c1")
        logged = "could not answer a call.cancel request it carried out: Redis did not answer"
        deadline = time.monotonic() + 30
        while logged not in caplog.text:
            assert time.monotonic() < deadline, "the owner did not say it could not answer"
            await asyncio.sleep(0.05)
        gc.collect()
        assert unhandled == []

        # Redis back: the owner serves on.
        own_redis.start()
        assert await asker.ask("owner-1", "act", {"n": 1}, "tool call c2") == 1
        assert ran == ["cancel", 1]


async def test_a_stall_while_the_answer_is_awaited_ends_at_the_deadline(
    own_redis: OwnRedis,
) -> None:
    """Redis stalls once the request is handed over (here: as the owner carries it out).
    A read of the answer already waiting in Redis ends on time, but the next one is held
    with every other command: the wait ends at the deadline (2.5 s, and half a second's
    grace for the last reply), saying the asker could not hear back, not when the stall
    ends (4 s here; up to the client's 5 s socket timeout)."""
    async with _owner_and_asker(own_redis.url, 2.5) as (owner, asker, ran):

        async def cancel_as_redis_stalls(args: dict[str, Any]) -> None:
            ran.append("cancel")
            own_redis.pause(4000)

        owner.handle("call.cancel", cancel_as_redis_stalls)
        started = time.monotonic()
        unheard = "could not hear whether the node that holds tool call c1 carried"
        with pytest.raises(Unavailable, match=unheard):
            await asker.ask("owner-1", "call.cancel", {}, "tool call c1")
        assert time.monotonic() - started < 3.8
        assert ran == ["cancel"]
        await asyncio.to_thread(own_redis.answers)
