"""The per-call output store limit (TETHER_OUTPUT_STORE_BYTES)."""

from __future__ import annotations

from tether.toolcalls.output import OutputBuffer


def test_output_past_the_limit_is_dropped_with_one_note() -> None:
    buf = OutputBuffer(memory_bytes=1 << 20, head_chars=1000, store_bytes=10_000)
    for _ in range(30):
        buf.append("stdout", "x" * 1000)
    text = buf.text()
    assert text.count("x") == 10_000
    assert text.count("output limit of 10000 bytes reached") == 1
    assert buf.dropped_bytes == 20_000
    assert buf.last_seq == 11  # ten full chunks, then the note; nothing after it


def test_limit_counts_utf8_bytes_and_never_splits_a_character() -> None:
    buf = OutputBuffer(memory_bytes=1 << 20, head_chars=100, store_bytes=5)
    buf.append("stdout", "ééé")  # 6 bytes
    kept = buf.text().split("\n")[0]
    assert kept == "éé"


def test_no_limit_keeps_everything() -> None:
    buf = OutputBuffer(memory_bytes=1 << 20, head_chars=100)
    for _ in range(50):
        buf.append("stderr", "y" * 1000)
    assert len(buf.text()) == 50_000
    assert buf.dropped_bytes == 0
