"""A task's event feed under long turns: live followers miss nothing however far the
kept log is shrunk, and a late follower's replay reads the same, shorter."""

from __future__ import annotations

import asyncio
from typing import Any

from tether.tasks.events import EventFeed


async def _collect(feed: EventFeed, into: list[dict[str, Any]]) -> None:
    async for batch in feed.follow():
        into.extend(batch)


def _turn(feed: EventFeed, deltas: int, outputs: int) -> None:
    for i in range(outputs):
        feed.emit({"type": "tool_call_output", "text": f"line {i}\n"})
    feed.emit({"type": "tool_call_ended"})
    for i in range(deltas):
        feed.emit({"type": "text_delta", "text": f"w{i} "})
    feed.emit({"type": "message", "kind": "assistant"})
    feed.emit({"type": "final"})
    feed.close()


async def test_a_live_follower_gets_every_event_of_a_long_turn() -> None:
    feed = EventFeed()
    got: list[dict[str, Any]] = []
    follower = asyncio.ensure_future(_collect(feed, got))
    await asyncio.sleep(0)  # it is following
    for i in range(25_000):
        feed.emit({"type": "tool_call_output", "text": f"line {i}\n"})
        if i % 1_000 == 0:
            await asyncio.sleep(0)  # it reads as the turn goes
    feed.emit({"type": "tool_call_ended"})
    feed.emit({"type": "final"})
    feed.close()
    await asyncio.wait_for(follower, 30)
    assert len(got) == 25_002
    assert [e["text"] for e in got[:-2]] == [f"line {i}\n" for i in range(25_000)]
    assert [e["type"] for e in got[-2:]] == ["tool_call_ended", "final"]


async def test_a_follower_that_reads_slowly_misses_nothing() -> None:
    feed = EventFeed()
    got: list[dict[str, Any]] = []
    follower = asyncio.ensure_future(_collect(feed, got))
    await asyncio.sleep(0)
    _turn(feed, deltas=30_000, outputs=15_000)  # all emitted before it reads one
    await asyncio.wait_for(follower, 30)
    assert [e["text"] for e in got[:15_000]] == [f"line {i}\n" for i in range(15_000)]
    assert got[15_000]["type"] == "tool_call_ended"
    text = "".join(e["text"] for e in got if e["type"] == "text_delta")
    assert text == "".join(f"w{i} " for i in range(30_000))
    assert [e["type"] for e in got[-2:]] == ["message", "final"]


async def test_what_is_there_when_a_follower_asks_comes_as_one_batch_deltas_joined() -> None:
    """One write per token: a 200,000-token answer was 200,047 writes and 12 MB."""
    feed = EventFeed()
    follower = feed.follow()
    feed.emit({"type": "task"})
    assert await anext(follower) == [{"type": "task"}]
    for i in range(5):
        feed.emit({"type": "reasoning_delta", "text": f"r{i}"})
    for i in range(1_000):
        feed.emit({"type": "text_delta", "text": f"w{i} "})
    feed.emit({"type": "message", "kind": "assistant"})
    feed.emit({"type": "text_delta", "text": "next"})
    assert await anext(follower) == [
        {"type": "reasoning_delta", "text": "r0r1r2r3r4"},
        {"type": "text_delta", "text": "".join(f"w{i} " for i in range(1_000))},
        {"type": "message", "kind": "assistant"},
        {"type": "text_delta", "text": "next"},
    ]
    feed.close()
    assert [batch async for batch in follower] == []


async def test_a_late_follower_replays_the_same_text_in_fewer_events() -> None:
    feed = EventFeed()
    _turn(feed, deltas=60_000, outputs=15_000)
    replay: list[dict[str, Any]] = []
    await asyncio.wait_for(_collect(feed, replay), 30)
    assert len(replay) < 20_000
    text = "".join(e["text"] for e in replay if e["type"] == "text_delta")
    assert text == "".join(f"w{i} " for i in range(60_000))
    assert [e["type"] for e in replay[-2:]] == ["message", "final"]


async def test_big_output_chunks_nobody_follows_are_not_kept() -> None:
    """Chunks of 64 KiB with no follower (a cron turn): the log held 10,000 of them
    (625 MiB) before its first shrink."""
    feed = EventFeed()
    chunk = "x" * 65_536
    for _ in range(1_000):
        feed.emit({"type": "tool_call_output", "text": chunk})
    feed.emit({"type": "final"})
    feed.close()
    replay: list[dict[str, Any]] = []
    await asyncio.wait_for(_collect(feed, replay), 30)
    kept = sum(len(e.get("text", "")) for e in replay)
    assert kept <= 8 * 1024 * 1024 and replay[-1]["type"] == "final"


async def _collect_until(feed: EventFeed, until: asyncio.Event, into: list[Any]) -> None:
    async for batch in feed.follow(until):
        into.extend(batch)


async def test_a_follower_waiting_at_the_exit_gets_what_was_emitted_with_it_then_ends() -> None:
    """Exit and final in one turn of the loop, the exit first: the final still goes out."""
    feed, exiting = EventFeed(), asyncio.Event()
    got: list[dict[str, Any]] = []
    follower = asyncio.ensure_future(_collect_until(feed, exiting, got))
    feed.emit({"type": "text_delta", "text": "4"})
    while not got:  # it took the first batch, and waits for the next in the same step
        await asyncio.sleep(0)
    exiting.set()
    feed.emit({"type": "final"})
    await asyncio.wait_for(follower, 5)
    assert [e["type"] for e in got] == ["text_delta", "final"]


async def test_a_follower_ends_at_the_exit_though_the_feed_never_runs_dry() -> None:
    feed, exiting = EventFeed(), asyncio.Event()
    feed.emit({"type": "tool_call_output", "text": "first\n"})
    batches = 0
    async for _batch in feed.follow(exiting):
        batches += 1
        feed.emit({"type": "tool_call_output", "text": "more\n"})  # a turn printing fast
        if batches == 3:
            exiting.set()
    assert batches == 4  # what was there when it saw the exit, and no more


async def test_a_quiet_follower_ends_at_the_exit() -> None:
    feed, exiting = EventFeed(), asyncio.Event()
    got: list[dict[str, Any]] = []
    follower = asyncio.ensure_future(_collect_until(feed, exiting, got))
    await asyncio.sleep(0)
    exiting.set()
    await asyncio.wait_for(follower, 5)
    assert got == [] and not feed._positions
