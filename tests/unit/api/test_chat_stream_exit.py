"""The chat stream at a server exit: a turn whose ``final`` was emitted by the time the
exit began delivers it, and the stream ends with it rather than with the exit frame.

The stream was cut as soon as the exit was set, dropping what the turn had emitted but
the reader had not yet taken; its last frame then said the turn goes on (or is stopped)
when it had in fact ended with an answer.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from tether.api.console_chat import ChatRequest, chat_stream
from tether.tasks.events import EventFeed

FINAL = {"type": "final", "task_id": "t1", "result": {"status": "completed"}}


class Tasks:
    """The task service's part the route uses: one turn, its feed in the test's hands."""

    def __init__(self) -> None:
        self.feed = EventFeed()

    async def submit(self, *args: Any, **kwargs: Any) -> str:
        return "t1"

    def follow(self, task_id: str, until: asyncio.Event | None = None) -> Any:
        return self.feed.follow(until) if until is not None else self.feed.follow()


def _services(tasks: Tasks) -> Any:
    settings = SimpleNamespace(detaches_at_exit=True)
    return SimpleNamespace(tasks=tasks, exiting=asyncio.Event(), settings=settings)


def _data(frames: list[str]) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])
        for written in frames
        for line in written.splitlines()
        if line.startswith("data: ")
    ]


@pytest.mark.parametrize("form", ["tether", "qwenpaw"])
async def test_a_final_emitted_as_the_exit_begins_is_delivered_then_the_stream_ends(
    form: str,
) -> None:
    tasks = Tasks()
    services = _services(tasks)
    body = ChatRequest(session_id="s1", input=[{"content": "hi"}])  # type: ignore[list-item]
    response = await chat_stream(body, services, events=form)  # type: ignore[arg-type]
    frames = response.body_iterator
    first = [await anext(frames)]  # the reader has the stream's first frame, no more yet
    # In one turn of the loop: the turn answers and ends, and the server begins to exit.
    tasks.feed.emit({"type": "text_delta", "text": "42"})
    tasks.feed.emit(
        {"type": "message", "kind": "assistant", "message": {"role": "assistant", "content": "42"}}
    )
    tasks.feed.emit(FINAL)
    tasks.feed.close()
    services.exiting.set()
    events = _data(first + [str(f) async for f in frames])

    assert not any(e.get("type") == "server_exiting" for e in events), events
    if form == "tether":
        assert events[-1] == FINAL
    else:
        last = events[-1]
        assert (last["object"], last["status"]) == ("response", "completed")
        assert last["output"][0]["content"][0]["text"] == "42"


async def test_a_stream_cut_by_the_exit_before_the_turn_ends_still_says_so() -> None:
    tasks = Tasks()
    services = _services(tasks)
    body = ChatRequest(session_id="s1", input=[{"content": "hi"}])  # type: ignore[list-item]
    response = await chat_stream(body, services, events="tether")  # type: ignore[arg-type]
    frames = response.body_iterator
    first = [await anext(frames)]
    tasks.feed.emit({"type": "text_delta", "text": "half"})
    services.exiting.set()
    events = _data(first + [str(f) async for f in frames])

    assert [e["type"] for e in events] == ["task", "text_delta", "server_exiting"]
    assert events[-1]["turn"] == "continues"
