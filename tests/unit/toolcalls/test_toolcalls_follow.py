"""Following a live call's output: every chunk reaches the follower, whatever the
follower was doing when the last ones came and the buffer closed."""

from __future__ import annotations

from typing import Any

from coordinator_parts import running_call, small_config

from tether.store.records import OutputChunk
from tether.toolcalls.call import CallInfo
from tether.toolcalls.index import CallIndex
from tether.toolcalls.live_call import LiveCall
from tether.toolcalls.output import OutputBuffer
from tether.toolcalls.reading import OutputReader


class NoStore:
    """A store with nothing in it: everything the test reads is in memory."""

    async def read_output(self, call_id: str, after_seq: int = 0) -> list[OutputChunk]:
        return []

    async def get(self, session_id: str, call_id: str) -> Any:
        return None


def _live_call() -> tuple[OutputReader, LiveCall]:
    repo: Any = NoStore()
    config = small_config()
    index = CallIndex(repo, config.max_per_session, config.max_total)
    call = running_call()
    index.add(call)
    return OutputReader(index, repo), call


async def test_chunks_that_come_with_the_close_while_the_follower_is_busy_are_read() -> None:
    reader, call = _live_call()
    call.buffer.append("stdout", "start\n")
    follow = reader.follow("s1", "c1", 0)

    first = await anext(follow)
    # While the follower is suspended at its yield (a client being written to), the
    # call prints its last line and ends.
    call.buffer.append("stdout", "end\n")
    call.buffer.close()
    call.status = "completed"
    call.finished.set()
    rest = [item async for item in follow]

    assert isinstance(first, OutputChunk) and first.text == "start\n"
    texts = [item.text for item in rest if isinstance(item, OutputChunk)]
    assert texts == ["end\n"]
    assert isinstance(rest[-1], CallInfo)


async def test_a_follower_joining_after_the_close_reads_everything_once() -> None:
    reader, call = _live_call()
    for line in ("a\n", "b\n", "c\n"):
        call.buffer.append("stdout", line)
    call.buffer.close()
    call.finished.set()

    items = [item async for item in reader.follow("s1", "c1", 1)]

    assert [i.seq for i in items if isinstance(i, OutputChunk)] == [2, 3]
    assert isinstance(items[-1], CallInfo)


class FlushedWhileRead:
    """A store a flusher writes to while a read of it is under way: the read returns
    what the store held when it began; meanwhile ``during_read`` runs once."""

    def __init__(self) -> None:
        self.chunks: list[OutputChunk] = []
        self.during_read: Any = None

    async def read_output(self, call_id: str, after_seq: int = 0) -> list[OutputChunk]:
        seen = [c for c in self.chunks if c.seq > after_seq]
        if self.during_read is not None:
            self.during_read, work = None, self.during_read
            work()
        return seen

    async def get(self, session_id: str, call_id: str) -> Any:
        return None


async def test_chunks_stored_and_let_go_of_during_a_read_of_the_store_are_not_skipped() -> None:
    store = FlushedWhileRead()
    config = small_config()
    repo: Any = store
    index = CallIndex(repo, config.max_per_session, config.max_total)
    call = running_call()
    call.buffer = OutputBuffer(memory_bytes=4, head_chars=0)  # two chunks of two
    index.add(call)
    reader = OutputReader(index, repo)

    def print_and_flush(*texts: str) -> None:
        for text in texts:
            call.buffer.append("stdout", text)
        store.chunks += call.buffer.unpersisted()
        call.buffer.mark_persisted(call.buffer.last_seq)

    print_and_flush("a1", "a2", "a3")  # memory let go of 1
    # While the reader reads the store (which has 1 to 3), the call prints 4 to 6 and
    # the flusher stores them: memory keeps 5 and 6 only.
    store.during_read = lambda: print_and_flush("a4", "a5", "a6")

    output = await reader.output("s1", "c1")

    assert output.pieces == ["a1", "a2", "a3", "a4", "a5", "a6"]
