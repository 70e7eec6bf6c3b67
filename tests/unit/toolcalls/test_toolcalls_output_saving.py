"""Saving a call's output: the periodic flush and the final save may overlap, and each
chunk must still be written once (a duplicate broke the turn with an IntegrityError)."""

from __future__ import annotations

import asyncio
from typing import Any

from coordinator_parts import running_call, small_config

from tether.store.records import OutputChunk
from tether.toolcalls.index import CallIndex
from tether.toolcalls.recorder import CallRecorder


class SlowOutputStore:
    """Records saved sequence numbers; each write yields, as a real database write does."""

    def __init__(self) -> None:
        self.saved: list[int] = []

    async def append_output(self, call_id: str, chunks: list[OutputChunk]) -> None:
        await asyncio.sleep(0)
        self.saved.extend(c.seq for c in chunks)


def _recorder(repo: Any) -> CallRecorder:
    config = small_config()
    return CallRecorder(repo, CallIndex(repo, 4, 8), config)


async def test_overlapping_saves_write_each_chunk_once() -> None:
    repo = SlowOutputStore()
    recorder = _recorder(repo)
    call = running_call()
    call.buffer.append("stdout", "one\n")
    call.buffer.append("stdout", "two\n")

    await asyncio.gather(recorder.persist_output(call), recorder.persist_output(call))

    assert repo.saved == [1, 2]
