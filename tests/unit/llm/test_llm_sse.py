"""The provider's event stream, read as the SSE spec reads it, piece by piece."""

from __future__ import annotations

import pytest

from tether.llm.reply import ModelError
from tether.llm.sse import Event, EventReader, events_in


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
