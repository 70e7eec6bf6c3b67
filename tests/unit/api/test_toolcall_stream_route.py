"""/stream of a call whose chat is deleted while the stream runs: the stream ends, with
``done`` if the call's end was read, instead of failing in the middle of the response
(an error in the server's log, and a connection cut without the end of the response)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from tether.api.toolcalls import stream_output
from tether.store.records import OutputChunk
from tether.toolcalls.errors import ToolCallNotFound

ENDED = SimpleNamespace(
    session_id="s1", tool_call_id="c1", end_state="cancelled", status="completed"
)


class Calls:
    """A call that prints one chunk, ends (``ended``: its end was read before the
    delete), and whose rows are deleted once the stream has begun."""

    def __init__(self, ended: bool) -> None:
        self.ended = ended
        self.deleted = False

    async def final_seq(self, session_id: str, call_id: str) -> int | None:
        if self.deleted:
            raise ToolCallNotFound(call_id)
        return None  # it runs as the stream is asked for

    async def follow(self, session_id: str, call_id: str, after: int) -> AsyncIterator[Any]:
        yield OutputChunk(seq=1, stream="stdout", text="a\n")
        self.deleted = True  # the chat is deleted (its turn stopped, its call ended)
        if not self.ended:
            raise ToolCallNotFound(call_id)
        yield ENDED


async def _frames(calls: Calls) -> list[str]:
    services = SimpleNamespace(calls=calls, exiting=asyncio.Event())
    response = await stream_output("s1", "c1", services)  # type: ignore[arg-type]
    return [str(frame) async for frame in response.body_iterator]


async def test_a_call_deleted_after_its_end_was_read_ends_the_stream_with_done() -> None:
    frames = await _frames(Calls(ended=True))

    assert [f.split("\n", 1)[0] for f in frames] == ["id: 1", "id: 2"]
    assert '"type":"done"' in frames[-1] and '"end_state":"cancelled"' in frames[-1]


async def test_a_call_deleted_before_its_end_was_read_ends_the_stream_quietly() -> None:
    frames = await _frames(Calls(ended=False))

    assert len(frames) == 1 and frames[0].startswith("id: 1\n")
