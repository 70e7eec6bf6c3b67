"""Reading a call's output: all of it so far, and following it as it comes."""

from __future__ import annotations

from collections.abc import AsyncIterator

from tether.store.records import OutputChunk
from tether.store.toolcalls import UNFINISHED, ToolCallRepository
from tether.toolcalls.call import CallInfo, CallOutput
from tether.toolcalls.errors import ToolCallNotFound
from tether.toolcalls.index import CallIndex
from tether.toolcalls.live_call import LiveCall, live_info


class OutputReader:
    """Output of live calls from memory (and the store for what memory let go), of ended
    calls from the store."""

    def __init__(self, index: CallIndex, repo: ToolCallRepository) -> None:
        self._index = index
        self._repo = repo

    async def output(self, session_id: str, call_id: str) -> CallOutput:
        """The output so far of a live or finished call."""
        call = self._index.get(session_id, call_id)
        if call is not None:
            chunks = await self._chunks_since(call, 0)
            return CallOutput([c.text for c in chunks], call.buffer.closed, call.end_state)
        record = await self._repo.get(session_id, call_id)
        if record is None:
            raise ToolCallNotFound(call_id)
        chunks = await self._repo.read_output(call_id)
        return CallOutput([c.text for c in chunks], True, record.end_state)

    async def final_seq(self, session_id: str, call_id: str) -> int | None:
        """The number of the call's last chunk once it has ended (0: it printed nothing);
        None while it runs. ToolCallNotFound if the session has no such call."""
        call = self._index.get(session_id, call_id)
        if call is not None:
            # Ended but still here: its end is not stored yet (a full disk keeps it here
            # until it is). Nothing is appended after the end, so memory knows the last
            # chunk (done's id came from each resume's own id, one higher every time).
            return call.buffer.last_seq if call.finished.is_set() else None
        record = await self._repo.get(session_id, call_id)
        if record is None:
            raise ToolCallNotFound(call_id)
        if record.status in UNFINISHED:
            return None
        return await self._repo.last_output_seq(call_id)

    async def _chunks_since(self, call: LiveCall, seq: int) -> list[OutputChunk]:
        """The chunks after ``seq``: what memory let go of from the store, the rest from
        memory. While the store is read, the flusher may store more chunks and memory let
        go of them, past what the read saw: the store is read again until memory holds
        the next chunk, so none falls between the two."""
        chunks: list[OutputChunk] = []
        while seq + 1 < call.buffer.first_seq_in_memory:
            stored = await self._repo.read_output(call.call_id, seq)
            if not stored:
                break  # cannot be: memory lets go only of chunks already stored
            chunks += stored
            seq = stored[-1].seq
        return chunks + call.buffer.since(seq)

    async def follow(
        self, session_id: str, call_id: str, after_seq: int
    ) -> AsyncIterator[OutputChunk | CallInfo]:
        """Output chunks after ``after_seq`` as they come, then the final info."""
        call = self._index.get(session_id, call_id)
        if call is None:
            await self._index.info(session_id, call_id)  # raises if unknown
            for chunk in await self._repo.read_output(call_id, after_seq):
                yield chunk
            yield await self._index.info(session_id, call_id)
            return
        seq = after_seq
        while True:
            # Whether the buffer was closed is taken before the read: nothing is appended
            # after a close, so a read that began closed holds the last chunk. Chunks that
            # come (with the close) while this generator waits at a yield are read on the
            # next round instead of being lost.
            closed = call.buffer.closed
            for chunk in await self._chunks_since(call, seq):
                seq = chunk.seq
                yield chunk
            if closed:
                break
            await call.buffer.wait(seq)
        await call.finished.wait()
        yield live_info(call)
