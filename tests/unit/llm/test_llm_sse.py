"""The provider's event stream, read as the SSE spec reads it, piece by piece."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tether.llm.reply import ModelError
from tether.llm.sse import Event, EventReader, events_in, take_events


def read(*pieces: bytes, limit: int = 1 << 20) -> list[Event]:
    reader = EventReader(limit)
    return [event for piece in pieces for event in reader.feed(piece)]


def test_every_line_end_the_spec_allows_ends_a_line_even_split_between_pieces() -> None:
    events = read(b"data: a\r", b"\n\r", b"\ndata: b\r\rdata: c\n", b"\n")
    assert events == [Event("message", "a"), Event("message", "b"), Event("message", "c")]


def test_data_lines_of_one_event_are_joined_and_its_type_kept() -> None:
    events = read(b'\xef\xbb\xbfevent: error\ndata: {"a":\ndata: 1}\n\ndata:2\n\n')
    assert events == [Event("error", '{"a":\n1}'), Event("message", "2")]


def test_an_event_the_stream_ends_inside_is_dropped_but_a_whole_body_keeps_its_last() -> None:
    assert read(b"data: 1\n\ndata: 2\n") == [Event("message", "1")]
    assert events_in(b"data: 1\n\ndata: 2") == [Event("message", "1"), Event("message", "2")]


def test_an_event_of_many_short_data_lines_is_bounded_like_one_long_line() -> None:
    reader = EventReader(limit=1000)
    with pytest.raises(ModelError, match="more than 1,000 bytes without ending"):
        for _ in range(200):
            reader.feed(b"data: xxxxxxxx\n")


def taken(*pieces: bytes) -> list[Event]:
    async def parts() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    events: list[Event] = []
    asyncio.run(take_events(parts(), events.append))
    return events


@pytest.mark.parametrize(
    ("last", "kept"),
    [
        (b'data: {"a": 2}\n', True),  # the blank line dropped
        (b'data: {"a": 2}', True),  # the line end too
        (b'data: [{"error": {}}]', True),  # Gemini's error list
        (b'event: error\ndata: {"a":\ndata: 2}', True),  # several data lines
        (b'data: {"a": ', False),  # cut inside its JSON
        (b"data: 2", False),  # JSON but no object or list: a cut "23" reads as whole
        (b"data: [DONE]", False),
    ],
)
def test_a_last_event_without_its_blank_line_is_kept_when_its_data_is_whole_json(
    last: bytes, kept: bool
) -> None:
    events = taken(b"data: 1\n\n", last)
    assert events[0] == Event("message", "1")
    assert len(events) == (2 if kept else 1)


def test_nothing_after_done_is_taken_even_without_a_blank_line() -> None:
    assert taken(b"data: 1\n\ndata: [DONE]\n\n", b'data: {"a": 2}') == [Event("message", "1")]
