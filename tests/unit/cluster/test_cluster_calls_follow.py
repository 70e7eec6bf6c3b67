"""Following a call another node runs, when its live stream lacks chunks the store does
not have yet either (Redis was away and the owner dropped copies, or the stream let go
of entries faster than the owner saves its batches): the reader skipped them for good."""

from __future__ import annotations

import dataclasses
from typing import Any

from tether.cluster.calls import ClusterCalls
from tether.cluster.output_streams import StreamRead
from tether.store.records import OutputChunk, ToolCallRecord

RECORD = ToolCallRecord(
    id="c1",
    session_id="s1",
    task_id="t1",
    agent_id="default",
    tool_name="execute_shell_command",
    arguments={},
    status="running",
    end_state=None,
    end_reason=None,
    force_cancelled=False,
    offload_reason=None,
    max_timeout=None,
    result=None,
    started_at=0.0,
    finished_at=None,
    owner="node-a",
)
OUTPUT = [OutputChunk(seq=n, stream="stdout", text=f"line {n}\n") for n in range(1, 5)]


class LaggingStore:
    """The owner's store: chunks 1 and 2 are saved only once they have been asked for
    twice (the owner's next batch); the call ends with chunk 4."""

    def __init__(self) -> None:
        self.reads = 0

    async def get(self, session_id: str, call_id: str) -> ToolCallRecord:
        return RECORD

    async def read_output(self, call_id: str, after_seq: int = 0) -> list[OutputChunk]:
        self.reads += 1
        saved = OUTPUT if self.reads > 2 else []
        return [c for c in saved if c.seq > after_seq]


class GappedStream:
    """The live stream holds only chunks 3 and 4, then the call's end."""

    async def read(self, call_id: str, after_seq: int, block_ms: int | None = None) -> StreamRead:
        return StreamRead([c for c in OUTPUT[2:] if c.seq > after_seq], ended=True)


class ThisNode:
    """The asking node: it does not run the call."""

    def is_live_here(self, session_id: str, call_id: str) -> bool:
        return False

    async def info(self, session_id: str, call_id: str) -> Any:
        return dataclasses.replace(RECORD, status="completed")


class Bus:
    streams = GappedStream()
    requests = object()
    unfinished = None


async def test_chunks_the_stream_lacks_are_read_from_the_store_once_saved() -> None:
    calls = ClusterCalls(ThisNode(), LaggingStore(), "node-b", Bus())  # type: ignore[arg-type]

    items = [item async for item in calls.follow("s1", "c1", 0)]

    chunks = [item.seq for item in items if isinstance(item, OutputChunk)]
    assert chunks == [1, 2, 3, 4]
    assert not isinstance(items[-1], OutputChunk)


class DeadOwnersStore(LaggingStore):
    """The owner died before saving chunks 1 and 2; a survivor ended the call."""

    async def get(self, session_id: str, call_id: str) -> ToolCallRecord:
        # Running when the reader first asks (it follows the call elsewhere), ended after.
        self.reads += 1
        return RECORD if self.reads == 1 else dataclasses.replace(RECORD, status="completed")

    async def read_output(self, call_id: str, after_seq: int = 0) -> list[OutputChunk]:
        return []


async def test_a_reader_does_not_wait_for_chunks_an_ended_call_never_saved() -> None:
    calls = ClusterCalls(ThisNode(), DeadOwnersStore(), "node-b", Bus())  # type: ignore[arg-type]

    items = [item async for item in calls.follow("s1", "c1", 0)]

    assert [item.seq for item in items if isinstance(item, OutputChunk)] == [3, 4]
