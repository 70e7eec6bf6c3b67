"""OutputBuffer: numbering, followers, eviction that never loses unsaved output, and the
capped view the model gets."""

from __future__ import annotations

import asyncio

from tether.toolcalls.output import OutputBuffer

WHERE = "/api/tool-calls/s/c/output"


def test_chunks_are_numbered_from_one_and_empty_text_is_ignored() -> None:
    buf = OutputBuffer(memory_bytes=1000, head_chars=100)
    assert buf.append("stdout", "a") is not None
    assert buf.append("stdout", "") is None
    chunk = buf.append("stderr", "b")
    assert chunk is not None and (chunk.seq, chunk.stream, chunk.text) == (2, "stderr", "b")
    assert [c.seq for c in buf.since(0)] == [1, 2]
    assert [c.seq for c in buf.since(1)] == [2]
    assert buf.text() == "ab" and buf.total_chars == 2 and buf.last_seq == 2


def test_closed_buffer_ignores_appends() -> None:
    buf = OutputBuffer(1000, 100)
    buf.close()
    assert buf.append("stdout", "late") is None
    assert buf.last_seq == 0


def test_unpersisted_chunks_are_never_evicted() -> None:
    buf = OutputBuffer(memory_bytes=10, head_chars=100)
    for i in range(5):
        buf.append("stdout", f"{i}" * 5)
    assert buf.first_seq_in_memory == 1  # nothing saved yet: all kept
    assert [c.seq for c in buf.unpersisted()] == [1, 2, 3, 4, 5]
    buf.mark_persisted(3)
    # Saved chunks go, oldest first, until memory fits again.
    assert buf.first_seq_in_memory == 4
    assert [c.seq for c in buf.unpersisted()] == [4, 5]
    assert buf.text() == "3333344444"
    assert buf.total_chars == 25


def test_first_seq_in_memory_of_an_empty_buffer() -> None:
    buf = OutputBuffer(10, 10)
    assert buf.first_seq_in_memory == 1


async def test_wait_returns_on_new_chunk_and_on_close() -> None:
    buf = OutputBuffer(1000, 100)
    waiter = asyncio.create_task(buf.wait(0))
    await asyncio.sleep(0)
    assert not waiter.done()
    buf.append("stdout", "x")
    await asyncio.wait_for(waiter, 1)
    waiter = asyncio.create_task(buf.wait(1))
    await asyncio.sleep(0)
    buf.close()
    await asyncio.wait_for(waiter, 1)


async def test_wait_returns_at_once_when_already_ahead() -> None:
    buf = OutputBuffer(1000, 100)
    buf.append("stdout", "x")
    await asyncio.wait_for(buf.wait(0), 1)


def test_model_view_of_short_output_is_whole() -> None:
    buf = OutputBuffer(1000, 100)
    buf.append("stdout", "hello\n")
    assert buf.model_view(100, WHERE) == "hello\n"


def test_model_view_keeps_head_and_tail_and_says_what_was_cut() -> None:
    buf = OutputBuffer(memory_bytes=100_000, head_chars=1000)
    for i in range(100):
        buf.append("stdout", f"line {i:03d}\n")  # 9 characters each
    view = buf.model_view(100, WHERE)
    assert view.startswith("line 000\nline 001\n")
    assert view.endswith("line 099\n")
    assert f"[... 800 characters cut; the full output is at {WHERE} ...]" in view
    head, _, tail = view.partition("\n\n[...")
    assert len(head) == 50 and len(tail.split("...]\n\n")[1]) == 50


def test_model_view_after_eviction_keeps_the_head() -> None:
    buf = OutputBuffer(memory_bytes=40, head_chars=1000)
    for i in range(30):
        buf.append("stdout", f"chunk{i:02d}|")  # 8 characters each
        buf.mark_persisted(i + 1)
    view = buf.model_view(100, WHERE)
    assert view.startswith("chunk00|chunk01|")
    assert view.endswith("chunk29|")
    assert "characters cut" in view


def test_model_view_after_eviction_with_short_output_comes_from_the_head() -> None:
    # The whole output fits the model's share but no longer fits memory: the head
    # (kept apart from memory) still holds all of it.
    buf = OutputBuffer(memory_bytes=30, head_chars=1000)
    for i in range(10):
        buf.append("stdout", f"{i}" * 10)
        buf.mark_persisted(i + 1)
    assert buf.first_seq_in_memory > 1
    assert buf.model_view(1000, WHERE) == "".join(f"{i}" * 10 for i in range(10))


def test_model_view_when_memory_is_smaller_than_the_tail_share() -> None:
    buf = OutputBuffer(memory_bytes=30, head_chars=60)
    for i in range(10):
        buf.append("stdout", f"{i}" * 10)
        buf.mark_persisted(i + 1)
    view = buf.model_view(60, WHERE)
    head, _, rest = view.partition("\n\n[... ")
    cut_text, _, tail = rest.partition(" ...]\n\n")
    cut = int(cut_text.split(" ", 1)[0])
    assert head == "0" * 10 + "1" * 10 + "2" * 10
    assert tail == "7" * 10 + "8" * 10 + "9" * 10
    assert len(head) + len(tail) + cut == 100


def test_model_view_never_repeats_head_characters_in_the_tail() -> None:
    # A head shorter than the model's share and a memory window that lost the middle:
    # head and tail meet exactly, nothing shown twice and no note of a cut.
    buf = OutputBuffer(memory_bytes=30, head_chars=40)
    for i in range(7):
        buf.append("stdout", f"{i}" * 10)
        buf.mark_persisted(i + 1)
    assert buf.model_view(100, WHERE) == "".join(f"{i}" * 10 for i in range(7))
