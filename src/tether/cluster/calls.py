"""Tool calls seen from any node: this node's from the coordinator, other nodes' through
the store, their live output streams and requests to the node that runs them.

The API and Tether's own MCP endpoint use this, never the coordinator directly, for
what a person asks of a call. On one node every call that is not ended is this node's,
and each method is the coordinator's own. Several nodes on one database without Redis
(``TETHER_REDIS_URL``) cannot reach each other: another node's call is read from the
store alone, followed until it ends there, and a request to act on it is refused
(Unavailable), never answered as if the call had ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from tether.cluster.output_streams import StreamRead
from tether.elsewhere import unreachable
from tether.errors import Unavailable
from tether.store.records import OutputChunk, ToolCallRecord
from tether.store.toolcalls import UNFINISHED, ToolCallRepository
from tether.toolcalls import deadlines as dl
from tether.toolcalls.call import CallInfo, CallOutput
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.toolcalls.errors import ToolCallNotFound
from tether.toolcalls.index import stored_info

if TYPE_CHECKING:
    from tether.cluster.bus import ClusterBus

# How long one wait on another node's output stream lasts before the store is asked
# whether the call ended without a word on the stream (its node died, say).
_BLOCK_MS = 1000
# How long a reader waits for the owner to save chunks the stream lacks (it saves its
# output every 0.2 s) before it reads the store again.
_STORE_BEHIND_SECONDS = 0.05


class ClusterCalls:
    """What a person can ask of any call, wherever it runs."""

    def __init__(
        self,
        coordinator: ToolCallCoordinator,
        repo: ToolCallRepository,
        owner: str | None,
        bus: ClusterBus | None = None,
    ) -> None:
        self._local = coordinator
        self._repo = repo
        self._owner = owner
        self._streams = bus.streams if bus is not None else None
        self._requests = bus.requests if bus is not None else None
        self._unfinished = bus.unfinished if bus is not None else None

    # ----------------------------------------------------------------- looking

    async def list_live(self, session_id: str) -> list[CallInfo]:
        """The session's calls in flight on every node, oldest first."""
        here = self._local.list_live(session_id)
        if self._unfinished is None:
            return here
        mine = {i.tool_call_id for i in here}
        elsewhere = [
            stored_info(r)
            for r in await self._unfinished.in_session(session_id)
            if r.id not in mine and not self._is_mine(r)
        ]
        return sorted([*here, *elsewhere], key=lambda i: i.started_at)

    async def info(self, session_id: str, call_id: str) -> CallInfo:
        return await self._local.info(session_id, call_id)

    async def final_seq(self, session_id: str, call_id: str) -> int | None:
        """The number of the call's last output chunk once it has ended; None while it
        runs, here or on another node (ToolCallNotFound if the session has no such call)."""
        if await self._elsewhere(session_id, call_id) is not None:
            return None
        return await self._local.final_seq(session_id, call_id)

    async def output(self, session_id: str, call_id: str) -> CallOutput:
        """The output so far."""
        record = await self._elsewhere(session_id, call_id)
        if record is None:
            return await self._local.output(session_id, call_id)
        return CallOutput([c.text async for c in self._chunks_so_far(record.id, 0)], False, None)

    async def follow(
        self, session_id: str, call_id: str, after_seq: int
    ) -> AsyncIterator[OutputChunk | CallInfo]:
        """Output chunks after ``after_seq`` as they come, then the final info."""
        record = await self._elsewhere(session_id, call_id)
        if record is None:
            async for item in self._local.follow(session_id, call_id, after_seq):
                yield item
            return
        async for item in self._follow_elsewhere(record, after_seq):
            yield item

    # ----------------------------------------------------------------- acting

    async def cancel(self, session_id: str, call_id: str, force: bool) -> None:
        record = await self._elsewhere(session_id, call_id)
        if record is None:
            return await self._local.cancel(session_id, call_id, force)
        args = {"session_id": session_id, "call_id": call_id, "force": force}
        await self._ask(record, "call.cancel", args)

    async def offload(self, session_id: str, call_id: str) -> CallInfo:
        record = await self._elsewhere(session_id, call_id)
        if record is None:
            return await self._local.offload(session_id, call_id)
        await self._ask(record, "call.offload", {"session_id": session_id, "call_id": call_id})
        return await self._local.info(session_id, call_id)

    async def extend(
        self, session_id: str, call_id: str, target: dl.DeadlineTarget, seconds: float | None
    ) -> CallInfo:
        record = await self._elsewhere(session_id, call_id)
        if record is None:
            return await self._local.extend(session_id, call_id, target, seconds)
        args = {"session_id": session_id, "call_id": call_id, "target": target, "seconds": seconds}
        await self._ask(record, "call.extend", args)
        return await self._local.info(session_id, call_id)

    # ----------------------------------------------------------------- routing

    def _is_mine(self, record: ToolCallRecord) -> bool:
        return record.owner is None or record.owner == self._owner

    async def _elsewhere(self, session_id: str, call_id: str) -> ToolCallRecord | None:
        """The call's record if another node runs it; None if this node answers for it
        (it runs here, or it has ended)."""
        if self._local.is_live_here(session_id, call_id):
            return None
        record = await self._repo.get(session_id, call_id)
        if record is None:
            raise ToolCallNotFound(call_id)
        if record.status not in UNFINISHED or self._is_mine(record):
            return None
        return record

    async def _ask(self, record: ToolCallRecord, action: str, args: dict[str, Any]) -> Any:
        assert record.owner is not None
        if self._requests is None:
            raise unreachable(f"tool call {record.id}")
        return await self._requests.ask(record.owner, action, args, f"tool call {record.id}")

    # ----------------------------------------------------------------- reading elsewhere

    async def _live_after(
        self, call_id: str, after_seq: int, block_ms: int | None = None
    ) -> StreamRead | None:
        """The call's live stream after ``after_seq``; None while Redis is away, or with
        no Redis at all (the store, which the owner writes in batches, is all there is
        then)."""
        if self._streams is None:
            return None
        try:
            return await self._streams.read(call_id, after_seq, block_ms)
        except Unavailable:
            return None

    async def _chunks_so_far(self, call_id: str, after_seq: int) -> AsyncIterator[OutputChunk]:
        """What the store has after ``after_seq``, then what the live stream has past it."""
        seq = after_seq
        for chunk in await self._repo.read_output(call_id, seq):
            seq = chunk.seq
            yield chunk
        read = await self._live_after(call_id, seq)
        for chunk in read.chunks if read is not None else ():
            yield chunk

    async def _follow_elsewhere(
        self, record: ToolCallRecord, after_seq: int
    ) -> AsyncIterator[OutputChunk | CallInfo]:
        seq = after_seq
        for chunk in await self._repo.read_output(record.id, seq):
            seq = chunk.seq
            yield chunk
        while True:
            read = await self._live_after(record.id, seq, _BLOCK_MS)
            if read is None:
                # Redis away (or none): what the store has by now, until the call ends
                # or Redis is back (the numbers are the same, so nothing repeats or goes
                # missing).
                for chunk in await self._repo.read_output(record.id, seq):
                    seq = chunk.seq
                    yield chunk
                if await self._has_ended(record):
                    break
                await asyncio.sleep(_BLOCK_MS / 1000)
                continue
            if read.chunks and read.chunks[0].seq > seq + 1:
                # The stream let go of entries (or never had them: Redis was away), which
                # the store has, or will once the owner saves its next batch. Asked
                # before the read: an end is stored with the last of the output.
                ended = await self._has_ended(record)
                for chunk in await self._repo.read_output(record.id, seq):
                    if chunk.seq < read.chunks[0].seq:
                        seq = chunk.seq
                        yield chunk
                if seq + 1 < read.chunks[0].seq and not ended:
                    await asyncio.sleep(_STORE_BEHIND_SECONDS)  # then read both again
                    continue
            for chunk in read.chunks:
                seq = chunk.seq
                yield chunk
            if read.ended or (not read.chunks and await self._has_ended(record)):
                break
        # Whatever reached only the store (a node that died mid-call), then the end.
        for chunk in await self._repo.read_output(record.id, seq):
            yield chunk
        yield await self._local.info(record.session_id, record.id)

    async def _has_ended(self, record: ToolCallRecord) -> bool:
        now = await self._repo.get(record.session_id, record.id)
        return now is None or now.status not in UNFINISHED
