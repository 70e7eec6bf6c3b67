"""Every node's unfinished calls of a session, kept in memory between changes.

A list of a session's calls on one node must show the calls other nodes run too. The
store has them; asking it on every list cost most of a list's time on PostgreSQL. So
each node keeps what the store last said per session, and every node that changes a
call's row (start, state, deadlines, end, a dead node's calls ended, adoption) says so on
one Redis channel after the change is committed. A node that hears of a session forgets
what it kept of it, and the next list reads the store again.

Nothing here is the record: the store is. What is kept is dropped when the subscription
is lost (then every list reads the store until it is back), when a node joins (its
recovery changed rows before it listened), and after ``MAX_AGE_SECONDS`` in any case: a
change made outside a node (by hand, say), or lost on a connection that died without
closing, shows within that time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from tether.cluster.redis_link import RedisLink
from tether.store.records import ToolCallRecord
from tether.store.toolcalls import ToolCallRepository
from tether.waits import within

log = logging.getLogger(__name__)

#: What a node sends for "forget every session" (a dead node's calls ended, a join).
EVERY_SESSION = "*"
MAX_AGE_SECONDS = 5.0
MAX_SESSIONS = 2000
# Changes waiting to be sent while Redis is away; past this, one "every session" is sent.
MAX_QUEUED = 10_000
_RETRY_SECONDS = (0.2, 1.0, 5.0)
_LAST_SEND_SECONDS = 1.0


@dataclass
class _Read:
    fresh: bool


class UnfinishedView:
    """The store's unfinished calls per session, forgotten when any node changes them."""

    def __init__(self, link: RedisLink, repo: ToolCallRepository) -> None:
        self._link = link
        self._repo = repo
        self._kept: OrderedDict[str, tuple[float, list[ToolCallRecord]]] = OrderedDict()
        # The reads of the store in flight, per session: a change heard meanwhile spoils
        # them (the read may predate it), and a spoiled read is returned but not kept.
        self._reading: dict[str, list[_Read]] = {}
        self._listening = False
        self._outbox: list[str] = []
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # Each message starts with its sender's word, so a node skips its own (it forgot
        # what it changed when it changed it).
        self._me = uuid.uuid4().hex[:12]

    @property
    def listening(self) -> bool:
        """Whether every change is heard now (else each list reads the store)."""
        return self._listening

    @property
    def channel(self) -> str:
        return self._link.key("calls-changed")

    async def in_session(self, session_id: str) -> list[ToolCallRecord]:
        """The session's unfinished calls on every node, oldest first."""
        kept = self._kept.get(session_id)
        if kept is not None and self._listening and time.monotonic() - kept[0] < MAX_AGE_SECONDS:
            return kept[1]
        read = _Read(fresh=self._listening)
        self._reading.setdefault(session_id, []).append(read)
        try:
            records = await self._repo.unfinished_in_session(session_id)
        finally:
            reads = self._reading[session_id]
            reads.remove(read)
            if not reads:
                del self._reading[session_id]
        if read.fresh:
            self._keep(session_id, records)
        return records

    def changed(self, session_id: str | None) -> None:
        """This node changed the session's calls in the store (None: any session's)."""
        self._forget(session_id or EVERY_SESSION)
        if len(self._outbox) < MAX_QUEUED:
            self._outbox.append(session_id or EVERY_SESSION)
        else:
            self._outbox = [EVERY_SESSION]
        self._wake.set()

    # ------------------------------------------------------------ running

    def start(self) -> None:
        """Listen, and tell the other nodes to forget what they kept (this node's start
        ended or adopted calls before it could say so)."""
        self.changed(None)
        self._tasks = [
            asyncio.create_task(self._listen_forever(), name="unfinished-view-listen"),
            asyncio.create_task(self._send_forever(), name="unfinished-view-send"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # What is left, once, briefly: a stop does not wait on a Redis that is away.
        with contextlib.suppress(Exception):
            await within(self._send(self._take()), _LAST_SEND_SECONDS)

    # ------------------------------------------------------------ inside

    def _keep(self, session_id: str, records: list[ToolCallRecord]) -> None:
        self._kept[session_id] = (time.monotonic(), records)
        self._kept.move_to_end(session_id)
        while len(self._kept) > MAX_SESSIONS:
            self._kept.popitem(last=False)

    def _forget(self, session_id: str) -> None:
        if session_id == EVERY_SESSION:
            self._kept.clear()
            spoiled = [r for reads in self._reading.values() for r in reads]
        else:
            self._kept.pop(session_id, None)
            spoiled = self._reading.get(session_id, [])
        for read in spoiled:
            read.fresh = False

    def _take(self) -> list[str]:
        batch, self._outbox = self._outbox, []
        self._wake.clear()
        return batch

    async def _send(self, batch: list[str]) -> None:
        if not batch:
            return
        pipe = self._link.client.pipeline(transaction=False)
        for session_id in dict.fromkeys(batch):
            pipe.publish(self.channel, f"{self._me} {session_id}")
        await pipe.execute()

    async def _send_forever(self) -> None:
        failing = False
        while True:
            await self._wake.wait()
            batch = self._take()
            try:
                await self._send(batch)
            except asyncio.CancelledError:
                self._outbox[:0] = batch  # for close() to send
                raise
            except Exception as exc:
                if not failing:
                    log.warning("cannot tell other nodes of call changes (%s)", exc)
                failing = True
                # Sent once Redis is back; the other nodes forget everything then too.
                self._outbox = [EVERY_SESSION, *self._outbox][:MAX_QUEUED]
                await asyncio.sleep(_RETRY_SECONDS[0])
                self._wake.set()
                continue
            failing = False

    async def _listen_forever(self) -> None:
        failures = 0
        while True:
            try:
                await self._listen()
            except Exception as exc:
                if failures == 0:
                    log.warning(
                        "not hearing other nodes' call changes (%s); reading the store", exc
                    )
            finally:
                if self._listening:
                    failures = 0
                self._listening = False
                self._forget(EVERY_SESSION)
            await asyncio.sleep(_RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)])
            failures += 1

    async def _listen(self) -> None:
        pubsub = self._link.client.pubsub()
        try:
            await pubsub.subscribe(self.channel)
            async for message in pubsub.listen():
                if message["type"] == "subscribe":
                    # From here on no change goes unheard.
                    self._forget(EVERY_SESSION)
                    self._listening = True
                elif message["type"] == "message":
                    sender, _, session_id = str(message["data"]).partition(" ")
                    if sender != self._me:
                        self._forget(session_id)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()
