"""A task's event feed: kept for replay, fanned out to live subscribers.

Every event gets a sequence number, and each follower remembers the last number it
sent, so shrinking the kept log never moves a follower (it once lost the end of a turn
when the log shrank under it). The log is shrunk only where every follower has been:
output chunks leave the replay, and a run of deltas of one kind becomes one delta with
their text. It is shrunk when it has grown to twice what the last shrink left (in
events, or in output text: chunks may be 64 KiB each), so each event costs constant
time however long the turn (a reply of 40,000 tokens took 21 s of the event loop when
every event past 10,000 re-read the whole log).
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import AsyncGenerator
from typing import Any

from tether.waits import any_set

_MAX_KEPT = 10_000
# Past this many events kept for a follower that does not read, its output goes.
_MOST_KEPT = 8 * _MAX_KEPT
# Output text kept before a shrink (characters).
_MAX_OUTPUT_CHARS = 4 * 1024 * 1024
# Events whose text a replay may join: a run of them reads the same as one.
_DELTAS = frozenset({"text_delta", "reasoning_delta"})
# Events a replay may leave out (the call's output has routes of its own).
_DROPPABLE = frozenset({"tool_call_output"})


class EventFeed:
    """Events of one task, numbered; subscribers get the past then the live ones."""

    def __init__(self) -> None:
        self._events: list[tuple[int, dict[str, Any]]] = []  # (number, event), in order
        self._numbers = itertools.count()
        self._limit = _MAX_KEPT
        # Output chunks may be large (64 KiB each): their text is bounded too.
        self._output_chars = 0
        self._output_limit = _MAX_OUTPUT_CHARS
        # The last number each follower sent (-1: none yet).
        self._positions: dict[int, int] = {}
        self._followers = itertools.count()
        self._changed = asyncio.Event()
        self.closed = False

    def emit(self, event: dict[str, Any]) -> None:
        if self.closed:
            return
        self._events.append((next(self._numbers), event))
        if event["type"] in _DROPPABLE:
            self._output_chars += len(str(event.get("text", "")))
        if len(self._events) >= self._limit or self._output_chars >= self._output_limit:
            self._shrink()
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _shrink(self) -> None:
        """Drop and join what every follower has sent (see the module doc)."""
        last = self._events[-1][0]
        seen = min(self._positions.values(), default=last)
        sent = self._after(seen)
        old = [entry for entry in self._events[:sent] if entry[1]["type"] not in _DROPPABLE]
        kept = [*_join_deltas(old), *self._events[sent:]]
        if len(kept) > _MOST_KEPT or _output_of(kept) > 4 * _MAX_OUTPUT_CHARS:
            # A follower that stopped reading holds the log: it loses output chunks it
            # has not read rather than the server its memory.
            kept = [entry for entry in kept if entry[1]["type"] not in _DROPPABLE]
        self._events = kept
        self._limit = max(_MAX_KEPT, 2 * len(kept))
        self._output_chars = _output_of(kept)
        self._output_limit = max(_MAX_OUTPUT_CHARS, 2 * self._output_chars)

    async def follow(
        self, until: asyncio.Event | None = None
    ) -> AsyncGenerator[list[dict[str, Any]]]:
        """The events, the past then the live ones, in batches: every event there is
        when the follower asks, each run of deltas of one kind joined. A client then
        reads one write where it read one per token (a 200,000-token answer was
        200,047 writes and 12 MB; a browser rendering it fell far behind).

        Once ``until`` is set (the server exits) the follower ends, after one last
        batch of what was emitted by the time it saw it: a turn's ``final`` emitted as
        the exit began still goes out (cut off outside, it was replaced by the
        stream's exit frame), and a feed that never runs dry cannot hold the exit."""
        me = next(self._followers)
        self._positions[me] = -1
        try:
            while True:
                # Taken before the read: what was emitted by then goes out first.
                stopping = until is not None and until.is_set()
                ready = self._events[self._after(self._positions[me]) :]
                if ready:
                    self._positions[me] = ready[-1][0]
                    yield [event for _, event in _join_deltas(ready)]
                    if stopping:
                        return
                    continue
                if self.closed or stopping:
                    return
                if until is None:
                    await self._changed.wait()
                else:
                    await any_set(self._changed, until)
        finally:
            del self._positions[me]

    def _after(self, number: int) -> int:
        """Where the first event numbered past ``number`` is in the log."""
        return bisect.bisect_right(self._events, number, key=lambda entry: entry[0])


def _join_deltas(entries: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """``entries`` with each run of deltas of one kind joined into one."""
    joined: list[tuple[int, dict[str, Any]]] = []
    run: list[tuple[int, dict[str, Any]]] = []
    for entry in entries:
        kind = entry[1]["type"]
        if run and kind != run[0][1]["type"]:
            joined.extend(_joined(run))
            run = []
        if kind in _DELTAS:
            run.append(entry)
        else:
            joined.append(entry)
    joined.extend(_joined(run))
    return joined


def _joined(run: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """A run of deltas of one kind as one, numbered as its last."""
    if len(run) < 2:
        return run
    number, last = run[-1]
    return [(number, {**last, "text": "".join(str(e.get("text", "")) for _, e in run)})]


def _output_of(entries: list[tuple[int, dict[str, Any]]]) -> int:
    return sum(len(str(e.get("text", ""))) for _, e in entries if e["type"] in _DROPPABLE)
