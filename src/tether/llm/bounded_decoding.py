"""A compressed body decoded to a bound on what it becomes, not on what was sent (pure).

The HTTP library inflates a body as it is read and the reader keeps all of it: 64 KiB of
gzip can become 64 MiB. Here each piece is inflated only as far as the room left, so a
decompression bomb costs no more than the bound.
"""

from __future__ import annotations

import zlib
from typing import Any

# What each encoding is inflated with: zlib's window bits (gzip's header; zlib's).
_WINDOW_BITS = {
    "gzip": zlib.MAX_WBITS | 16,
    "x-gzip": zlib.MAX_WBITS | 16,
    "deflate": zlib.MAX_WBITS,
}


class BoundedDecoder:
    """Inflates one body of a single ``gzip`` or ``deflate`` encoding."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._inflate: Any = zlib.decompressobj(_WINDOW_BITS[encoding])
        self._first = True

    @staticmethod
    def for_encodings(encodings: list[str]) -> BoundedDecoder | None:
        """The decoder for ``encodings`` (a Content-Encoding's list, ``identity`` left
        out); None when it is not one encoding this module can bound (br, zstd, a chain
        of them): such a body is not read."""
        if len(encodings) == 1 and encodings[0] in _WINDOW_BITS:
            return BoundedDecoder(encodings[0])
        return None

    def decode(self, data: bytes, room: int) -> bytes:
        """What ``data`` inflates to, at most ``room`` bytes of it (the rest is never
        made); b"" once the data is not of its encoding."""
        first, self._first = self._first, False
        if first and self._encoding == "deflate" and not _zlib_header(data):
            # Servers have sent "deflate" as a raw deflate stream, without zlib's header.
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        if self._inflate is None:
            return b""
        try:
            return bytes(self._inflate.decompress(data, room))
        except zlib.error:
            self._inflate = None
            return b""


def _zlib_header(data: bytes) -> bool:
    """Whether ``data`` opens with zlib's two-byte header (RFC 1950: deflate, and a
    check that makes the pair a multiple of 31)."""
    return len(data) >= 2 and data[0] & 0x0F == 8 and int.from_bytes(data[:2], "big") % 31 == 0
