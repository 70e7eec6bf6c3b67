"""The output file: stdout and stderr, tagged and in order, in one append-only file.

Each record is ``<tag><length: 8 hex digits>:<bytes>\\n`` with tag ``o`` (stdout) or
``e`` (stderr). A record's event id is the byte position just past it, so a reader that
resumes at an event id starts exactly at the next record: no gap, no duplicate. The
runner never splits a UTF-8 character across records, so each decodes on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tether.keeper import layout

_TAGS = {b"o"[0]: "stdout", b"e"[0]: "stderr"}
_TAG_OF = {"stdout": b"o", "stderr": b"e"}
_HEADER = 10  # tag, 8 hex digits, ':'
_HEX = frozenset(b"0123456789abcdef")


class CorruptOutput(Exception):
    """The output file does not hold well-formed records from ``position`` on."""

    def __init__(self, path: Path | None, position: int, why: str) -> None:
        self.path, self.position = path, position
        super().__init__(f"output file {path} is corrupt at byte {position}: {why}")


@dataclass(frozen=True)
class Record:
    """One piece of output; ``end`` (the position past it) is its event id."""

    end: int
    stream: str
    text: str


def encode(stream: str, data: bytes) -> bytes:
    """One record holding ``data`` printed on ``stream``."""
    return _TAG_OF[stream] + f"{len(data):08x}:".encode() + data + b"\n"


def complete_utf8(data: bytes) -> int:
    """How many leading bytes of ``data`` end on a character boundary (an incomplete
    character at the end is held back for the next read; invalid bytes are not)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80 or byte >= 0xF8:  # ASCII, or never the start of a character
            return len(data)
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


def parse(data: bytes, base: int, path: Path | None = None) -> tuple[list[Record], int]:
    """The whole records in ``data`` (read from position ``base``), and the position
    after the last one. A record cut short at the end is left for later; anything that
    is not a record raises :class:`CorruptOutput`."""
    records: list[Record] = []
    at = 0
    while len(data) - at >= _HEADER:
        tag, digits = data[at], data[at + 1 : at + 9]
        if tag not in _TAGS or data[at + 9] != ord(":") or not set(digits) <= _HEX:
            raise CorruptOutput(path, base + at, "not a record header")
        size = int(digits, 16)
        end = at + _HEADER + size + 1
        if end > len(data):
            break
        if data[end - 1] != ord("\n"):
            raise CorruptOutput(path, base + at, "record not terminated")
        text = data[at + _HEADER : end - 1].decode("utf-8", errors="replace")
        records.append(Record(end=base + end, stream=_TAGS[tag], text=text))
        at = end
    return records, base + at


def read_records(path: Path, position: int, limit: int = 1 << 20) -> tuple[list[Record], int]:
    """Records from ``position`` on (at most about ``limit`` bytes of them), and the
    position to read from next. A missing file reads as empty (nothing printed yet);
    one that is not a regular file (a FIFO, a link) is corrupt."""
    try:
        data = layout.read_file(path, limit, offset=position)
    except layout.Unreadable as exc:
        raise CorruptOutput(path, position, exc.why) from exc
    if data is None:
        return [], position
    records, after = parse(data, position, path)
    if not records and len(data) == limit:
        # One record larger than the window: read exactly that record.
        return read_records(path, position, limit * 4)
    return records, after


def trailing_garbage(path: Path, position: int) -> int:
    """Bytes past ``position`` that are not whole records (a call that ended with a
    record cut short, say by a full disk, leaves some)."""
    try:
        return max(0, path.stat().st_size - position)
    except FileNotFoundError:
        return 0
