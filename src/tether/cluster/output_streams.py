"""Each live call's output as a Redis Stream, so any node can follow a call another runs.

The node running a call appends every chunk to the call's stream with the chunk's own
number as the entry id (``0-<seq>``), then one end entry once the call's end is in the
store. A reader elsewhere asks for the entries after the last event id it saw, which is
exactly what ``Last-Event-ID`` names, on any node and across a node's restart: no gap,
no duplicate, no counter kept anywhere.

The stream is a live copy, not the record: the store holds the output too (written in
batches), and readers take from the store what the stream no longer has. So a stream is
capped in length and expires soon after its call ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from tether.cluster.redis_link import RedisLink
from tether.store.records import OutputChunk

log = logging.getLogger(__name__)

# Entries kept per running call (older ones are in the store by then), and how long a
# call's stream stays once it ended.
MAX_ENTRIES = 5000
KEEP_AFTER_END_SECONDS = 600
# Entries waiting to be sent while Redis is away; past this, chunks are not copied (a
# reader elsewhere sees the gap and reads them from the store), ends still are.
MAX_QUEUED = 100_000
_END = "end"


@dataclass(frozen=True)
class StreamRead:
    """What a read of a call's stream found after a given chunk number."""

    chunks: list[OutputChunk]
    ended: bool


class OutputStreams:
    """Writes the output of this node's calls to their streams (the coordinator's
    ``OutputMirror``) and reads any call's stream.

    Writes are queued and sent in pipelined batches by one task, so a tool that prints
    fast costs one round trip per batch, and the coordinator never waits on Redis.
    """

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._queue: list[tuple[str, OutputChunk | int]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Whether the last send failed: an outage is logged once, not per batch.
        self._failing = False

    def key(self, call_id: str) -> str:
        return self._link.key("call", call_id, "output")

    # ------------------------------------------------------------ OutputMirror

    def chunk(self, call_id: str, chunk: OutputChunk) -> None:
        if len(self._queue) < MAX_QUEUED:
            self._queue.append((call_id, chunk))
            self._wake.set()

    def ended(self, call_id: str, last_seq: int) -> None:
        self._queue.append((call_id, last_seq))
        self._wake.set()

    # ------------------------------------------------------------ sending

    def start(self) -> None:
        self._task = asyncio.create_task(self._send_forever(), name="output-streams")

    async def close(self) -> None:
        """Send what is queued, then stop."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await self._send(self._take())

    def _take(self) -> list[tuple[str, OutputChunk | int]]:
        batch, self._queue = self._queue, []
        self._wake.clear()
        return batch

    async def _send_forever(self) -> None:
        while True:
            await self._wake.wait()
            batch = self._take()
            try:
                await self._send(batch)
            except Exception as exc:
                # Redis away: readers elsewhere fall back to the store; keep going.
                if not self._failing:
                    log.warning("cannot copy live output to Redis (%s); will keep trying", exc)
                self._failing = True
                continue
            if self._failing:
                log.info("copying live output to Redis again")
                self._failing = False

    async def _send(self, batch: list[tuple[str, OutputChunk | int]]) -> None:
        if not batch:
            return
        pipe = self._link.client.pipeline(transaction=False)
        for call_id, item in batch:
            key = self.key(call_id)
            if isinstance(item, OutputChunk):
                fields = {"s": item.stream, "t": item.text}
                pipe.xadd(key, fields, id=f"0-{item.seq}", maxlen=MAX_ENTRIES, approximate=True)
            else:
                pipe.xadd(key, {_END: "1"}, id=f"0-{item + 1}")
                pipe.expire(key, KEEP_AFTER_END_SECONDS)
        # An id at or below the stream's last is refused; that is a chunk sent before
        # (an adopted call replays its output from the start), so it is skipped.
        await pipe.execute(raise_on_error=False)

    # ------------------------------------------------------------ reading

    async def read(self, call_id: str, after_seq: int, block_ms: int | None = None) -> StreamRead:
        """The chunks after ``after_seq``; with ``block_ms``, waiting up to that long for
        the first (None: answer at once). Unavailable while Redis is away."""
        with self._link.reaching(f"read the live output of tool call {call_id}"):
            found = await self._link.client.xread(
                {self.key(call_id): f"0-{after_seq}"}, count=1000, block=block_ms
            )
        chunks: list[OutputChunk] = []
        ended = False
        for _key, entries in found or ():
            for entry_id, fields in entries:
                if _END in fields:
                    ended = True
                    break
                seq = int(entry_id.split("-", 1)[1])
                chunks.append(OutputChunk(seq=seq, stream=fields["s"], text=fields["t"]))
        return StreamRead(chunks, ended)
