"""A tool call's output: ordered chunks, live followers and a bounded memory window."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from tether import model_texts
from tether.store.records import OutputChunk
from tether.text import storable


class OutputBuffer:
    """Chunks a tool emits, numbered from 1.

    Readers take what exists with :meth:`since` and wait for more with :meth:`wait`.
    Memory keeps the newest ``memory_bytes`` worth of chunks, never evicting one that has
    not yet been written to the store (``mark_persisted``), so the store plus memory
    always hold the whole output. The first ``head_chars`` characters are kept apart for
    the model's view. At most ``store_bytes`` (UTF-8) of output is kept at all: past
    that the buffer appends one note saying so and drops the rest, so a command that
    prints forever cannot fill the disk.
    """

    def __init__(
        self,
        memory_bytes: int,
        head_chars: int,
        store_bytes: int | None = None,
        on_chunk: Callable[[OutputChunk], None] | None = None,
    ) -> None:
        self._memory_bytes = memory_bytes
        # Told of each new chunk (a cluster's live copy for other nodes).
        self._on_chunk = on_chunk
        self._store_bytes = store_bytes
        self._stored_bytes = 0
        self.dropped_bytes = 0
        self._head_chars = head_chars
        self._chunks: deque[OutputChunk] = deque()
        self._bytes = 0
        self._head: list[str] = []
        self._head_len = 0
        self._last_seq = 0
        self._persisted_seq = 0
        self._total_chars = 0
        self._changed = asyncio.Event()
        self.closed = False

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def total_chars(self) -> int:
        return self._total_chars

    @property
    def first_seq_in_memory(self) -> int:
        return self._chunks[0].seq if self._chunks else self._last_seq + 1

    def append(self, stream: str, text: str) -> OutputChunk | None:
        """Add a chunk; ignored once the buffer is closed or full (see the class doc)."""
        if self.closed or not text:
            return None
        # A NUL could not be stored on PostgreSQL (the output, and its turn, were lost).
        text = storable(text)
        if self._store_bytes is not None:
            text = self._within_store_limit(text)
            if not text:
                return None
        return self._add(stream, text)

    def _within_store_limit(self, text: str) -> str:
        """The part of ``text`` that still fits; on the first overflow, a note too."""
        assert self._store_bytes is not None
        if self.dropped_bytes:
            self.dropped_bytes += len(text.encode())
            return ""
        data = text.encode()
        room = self._store_bytes - self._stored_bytes
        if len(data) <= room:
            self._stored_bytes += len(data)
            return text
        self.dropped_bytes = len(data) - room
        kept = data[:room].decode("utf-8", errors="ignore")
        self._stored_bytes = self._store_bytes
        return kept + model_texts.output_limit_reached(self._store_bytes)

    def _add(self, stream: str, text: str) -> OutputChunk:
        self._last_seq += 1
        chunk = OutputChunk(seq=self._last_seq, stream=stream, text=text)
        self._chunks.append(chunk)
        self._bytes += len(text)
        self._total_chars += len(text)
        if self._head_len < self._head_chars:
            piece = text[: self._head_chars - self._head_len]
            self._head.append(piece)
            self._head_len += len(piece)
        self._evict()
        self._wake()
        if self._on_chunk is not None:
            self._on_chunk(chunk)
        return chunk

    def unpersisted(self) -> list[OutputChunk]:
        """Chunks not yet written to the store."""
        return [c for c in self._chunks if c.seq > self._persisted_seq]

    def mark_persisted(self, seq: int) -> None:
        self._persisted_seq = max(self._persisted_seq, seq)
        self._evict()

    def since(self, seq: int) -> list[OutputChunk]:
        """Chunks in memory numbered above ``seq``."""
        return [c for c in self._chunks if c.seq > seq]

    def close(self) -> None:
        self.closed = True
        self._wake()

    async def wait(self, seq: int) -> None:
        """Return once there is a chunk above ``seq`` or the buffer is closed."""
        while not self.closed and self._last_seq <= seq:
            await self._changed.wait()

    def text(self) -> str:
        """The output held in memory, joined."""
        return "".join(c.text for c in self._chunks)

    def model_view(self, limit: int, where: str) -> str:
        """The output for the model: whole if short, else head and tail with a note.

        The head is kept apart from the memory window, so it survives eviction; the tail
        comes from memory and never repeats characters the head already shows.
        """
        memory = self.text()
        head_all = "".join(self._head)
        if self._total_chars <= limit:
            if self.first_seq_in_memory == 1:
                return memory
            if len(head_all) == self._total_chars:
                return head_all
        half = limit // 2
        head = head_all[:half]
        tail_len = min(half, self._total_chars - len(head), len(memory))
        tail = memory[len(memory) - tail_len :] if tail_len > 0 else ""
        cut = self._total_chars - len(head) - len(tail)
        if cut <= 0:
            return head + tail
        return f"{head}{model_texts.output_cut(cut, where)}{tail}"

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _evict(self) -> None:
        while (
            self._bytes > self._memory_bytes
            and self._chunks
            and self._chunks[0].seq <= self._persisted_seq
        ):
            self._bytes -= len(self._chunks.popleft().text)
