"""The HTTP client Tether gives the openai SDK: the body of an error answer is cut short.

The SDK reads an error answer's body whole before it raises (to quote it), so a gateway
that answered 400 and then never stopped sending made the server hold all it sent. The
cut is on the bytes as sent and on what they inflate to: cut on the bytes as sent alone,
64 KiB of gzip became 64 MiB held by the server (``llm.bounded_decoding`` inflates them
instead of the HTTP library, to the bound; an encoding it cannot bound is not read). The
message quoted is a sentence anyway (``llm.errors``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
from collections.abc import AsyncIterator
from typing import Any

from tether.llm.bounded_decoding import BoundedDecoder

#: The most bytes of an error answer's body read: far past any provider's error object or
#: a proxy's error page.
MAX_ERROR_BODY_BYTES = 64 * 1024


#: The encodings asked of providers: those ``llm.bounded_decoding`` can inflate to a
#: bound. The HTTP library would also ask for br and zstd where their packages are
#: installed, and an error body in those would not be read at all.
ACCEPT_ENCODING = "gzip, deflate"


def bounded_http_client() -> Any:
    """The SDK's own default client (its timeouts, pool and redirects), with the cut."""
    return _client_class()(
        headers={"Accept-Encoding": ACCEPT_ENCODING}, event_hooks={"response": [_cut_error_body]}
    )


@functools.cache
def _client_class() -> type:
    import openai

    class BoundedClient(openai.DefaultAsyncHttpxClient):
        """Closed once dropped, as the client the SDK makes for itself is: a model is
        dropped when another becomes the active one, while a turn may still use it."""

        def __del__(self) -> None:
            if self.is_closed:
                return
            try:
                closing = asyncio.get_running_loop().create_task(self.aclose())
            except RuntimeError:  # no loop runs: the process is ending
                return
            _closing.add(closing)
            closing.add_done_callback(_closing.discard)

    return BoundedClient


# The closes under way (the loop keeps only a weak reference to a task).
_closing: set[asyncio.Task[None]] = set()


async def _cut_error_body(response: Any) -> None:
    if response.status_code < 400:
        return
    listed = response.headers.get_list("content-encoding", split_commas=True)
    encodings = [e.strip().lower() for e in listed if e.strip().lower() not in ("", "identity")]
    decoder = BoundedDecoder.for_encodings(encodings) if encodings else None
    if encodings:
        # The body handed on is already decoded (or empty): the library must not decode it.
        del response.headers["content-encoding"]
    cut = _cut_stream_class(type(response).__module__)
    response.stream = cut(response.stream, decoder, readable=decoder is not None or not encodings)


@functools.cache
def _cut_stream_class(response_module: str) -> type:
    """A stream of the HTTP library's own kind (httpx, or httpx2 in newer SDKs; it takes
    no other) that ends after MAX_ERROR_BODY_BYTES."""
    library = importlib.import_module(response_module.partition(".")[0])

    class CutStream(library.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, decoder: BoundedDecoder | None, readable: bool) -> None:
            self._inner = inner
            self._decoder = decoder
            self._readable = readable

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if not self._readable:
                return
            sent = made = 0  # bytes as sent, and as handed on
            async for part in self._inner:
                part = part[: MAX_ERROR_BODY_BYTES - sent]
                sent += len(part)
                room = MAX_ERROR_BODY_BYTES - made
                out = part[:room] if self._decoder is None else self._decoder.decode(part, room)
                made += len(out)
                if out:
                    yield out
                if sent >= MAX_ERROR_BODY_BYTES or made >= MAX_ERROR_BODY_BYTES:
                    return

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CutStream
