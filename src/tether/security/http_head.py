"""A bound on a request's head (request line and headers) at the HTTP protocol.

uvicorn's httptools protocol is the fast parser (about twice h11's throughput on the list
benchmark), but neither httptools nor uvicorn limits the head: an endless header line is
buffered until memory runs out, before any middleware sees a request. This protocol feeds
the parser at most ``MAX_HEAD_BYTES`` of a head and answers 431 past that, then closes
the connection; nothing more of that request is read or kept.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024

_REFUSAL_BODY = f"Request line and headers larger than {MAX_HEAD_BYTES} bytes\n".encode()
_REFUSAL = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: " + str(len(_REFUSAL_BODY)).encode() + b"\r\n"
    b"connection: close\r\n\r\n" + _REFUSAL_BODY
)


class BoundedHeadProtocol(HttpToolsProtocol):
    """HttpToolsProtocol that refuses heads larger than ``MAX_HEAD_BYTES`` with a 431.

    Bytes count from the connection's start, or the end of the previous request on a
    kept-alive connection, until the parser reports the headers complete. The rest of
    the read in which the previous request ended goes uncounted (it was fed to the parser
    in the same call), so the bound is then the limit plus one read (asyncio reads at
    most 256 KiB at a time): still a fixed size.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0

    def data_received(self, data: bytes) -> None:
        # While in a head, the parser gets only what still fits under the limit, so it
        # can never hold more than that of one head.
        while data and self._in_head:
            if self.transport.is_closing():
                return
            room = MAX_HEAD_BYTES - self._head_bytes
            if room <= 0:
                self._refuse()
                return
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
        if data and not self.transport.is_closing():
            super().data_received(data)

    def _refuse(self) -> None:
        self.logger.warning("Request head larger than %d bytes refused (431)", MAX_HEAD_BYTES)
        self.transport.write(_REFUSAL)
        self.transport.close()
