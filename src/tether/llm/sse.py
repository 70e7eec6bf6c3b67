"""A provider's event stream read as the WHATWG spec reads Server-Sent Events, by Tether
rather than the openai SDK, whose decoder hands on events the spec says to drop.

An event with no data is not dispatched (the spec's rule): gateways send ``data:`` with
nothing after it, or ``retry:`` or ``id:`` alone, as keep-alives, and the SDK passed
each on as an empty chunk that failed the turn as "not JSON". Comments (``: ping``)
are skipped too. Bytes that are not UTF-8 read as U+FFFD: the SDK's strict decode
raised, and the turn ended on an internal error. One departure from the spec: a last
event the stream ends without its blank line is kept when its data is whole JSON (see
:func:`take_events`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass

from tether.llm.reply import ModelError

#: The most bytes one line, or one event's data, may take before its end is seen: as
#: much as a whole reply taken as one JSON body (a gateway that ignored ``stream``), far
#: past any chunk a provider sends. The openai SDK's decoder held a line without bound,
#: so a gateway that never ended one could make the server hold all it sent.
MAX_EVENT_BYTES = 64 * 1024 * 1024

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = "\ufeff"


@dataclass(frozen=True)
class Event:
    """One dispatched event: its type (``message`` when the stream names none) and data."""

    type: str
    data: str

    @property
    def is_done(self) -> bool:
        """OpenAI's end of a completion stream, ``data: [DONE]``."""
        return self.data.strip() == "[DONE]"


class EventReader:
    """Bytes in, as they arrive; the events they complete out. An event the stream ends
    in the middle of is dropped, as the spec says."""

    def __init__(self, limit: int = MAX_EVENT_BYTES) -> None:
        self._limit = limit
        self._line = bytearray()
        self._after_cr = False  # a CR ended the last piece: an LF opening the next is its pair
        self._first_line = True
        self._type = ""
        self._data: list[str] = []
        self._data_size = 0

    def feed(self, piece: bytes) -> list[Event]:
        """The events ``piece`` completes. Raises ModelError past the limit."""
        if not piece:
            return []
        at = 1 if self._after_cr and piece[:1] == b"\n" else 0
        events = []
        for end in _LINE_END.finditer(piece, at):
            self._line += piece[at : end.start()]
            self._check_size()
            event = self._take_line(self._line)
            self._line.clear()
            if event is not None:
                events.append(event)
            at = end.end()
        self._line += piece[at:]
        self._check_size()
        self._after_cr = piece.endswith(b"\r")
        return events

    def end(self) -> Event | None:
        """The event the stream's end leaves pending, as the blank line it lacks would
        have dispatched it (a last line taken even without its line end); None if none.
        The spec drops it: :func:`take_events` says when it is kept."""
        if self._line:
            self._take_line(self._line)  # a line that is not blank dispatches nothing
            self._line.clear()
        return self._dispatch()

    def _check_size(self) -> None:
        if len(self._line) + self._data_size > self._limit:
            raise ModelError(
                f"the model provider's stream sent more than {self._limit:,} bytes without "
                "ending a line or an event, and was cut off there; nothing of that reply "
                "was kept"
            )

    def _take_line(self, raw: bytearray) -> Event | None:
        line = raw.decode("utf-8", "replace")
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._data_size += len(raw) + 1
        elif name == "event":
            self._type = value
        # ``id`` and ``retry`` matter to a client that reconnects; this one does not.
        return None

    def _dispatch(self) -> Event | None:
        data, kind = "\n".join(self._data), self._type
        self._data, self._data_size, self._type = [], 0, ""
        if not data.strip():  # the spec drops only empty data; blank lines carry nothing either
            return None
        return Event(kind or "message", data)


def events_in(body: bytes) -> list[Event]:
    """The events of a whole body (one labelled JSON that was an event stream); its last
    is taken even without the blank line that ends it, as nothing of it was cut."""
    return EventReader().feed(body + b"\n\n")


#: How long the rest of a body after ``[DONE]`` is read (so that its connection can be
#: used again) before the connection is dropped instead, as the openai SDK does.
DRAIN_SECONDS = 0.1


async def take_events(parts: AsyncIterable[bytes], take: Callable[[Event], None]) -> None:
    """Hand each event of the stream ``parts`` to ``take``, up to ``[DONE]`` or the end.

    Unlike the spec, a last event the stream ends without its blank line is kept when
    its data is a whole JSON object or list: proxies have been seen to drop the final
    blank line (or the last line end too), and that event is often the one with the
    last text and the finish reason, lost without a word. A cut JSON value does not
    parse, so the spec's reason to drop the event (it may be incomplete) holds only
    for data that is not whole JSON, which is still dropped.
    """
    reader = EventReader()
    done = False
    try:
        async with asyncio.timeout(None) as drain:
            async for part in parts:
                if done:
                    continue
                for event in reader.feed(part):
                    if event.is_done:
                        done = True
                        drain.reschedule(asyncio.get_running_loop().time() + DRAIN_SECONDS)
                        break
                    take(event)
    except TimeoutError:
        if not done:
            raise
    if not done:
        last = reader.end()
        if last is not None and not last.is_done and _whole_json(last.data):
            take(last)


def _whole_json(data: str) -> bool:
    """Whether ``data`` is one whole JSON object or list (no prefix of one is)."""
    try:
        return isinstance(json.loads(data), dict | list)
    except (ValueError, RecursionError):
        return False
