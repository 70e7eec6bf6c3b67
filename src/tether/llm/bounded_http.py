"""The HTTP client Tether gives the openai SDK: the body of an error answer is cut short.

The SDK reads an error answer's body whole before it raises (to quote it), so a gateway
that answered 400 and then never stopped sending made the server hold all it sent. The
cut is on the bytes as sent: one deflated 64 KiB grows to at most about 64 MiB, the
most a whole reply may be. The message quoted is a sentence anyway (``llm.errors``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
from collections.abc import AsyncIterator
from typing import Any

#: The most bytes of an error answer's body read: far past any provider's error object or
#: a proxy's error page.
MAX_ERROR_BODY_BYTES = 64 * 1024


def bounded_http_client() -> Any:
    """The SDK's own default client (its timeouts, pool and redirects), with the cut."""
    return _client_class()(event_hooks={"response": [_cut_error_body]})


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
    if response.status_code >= 400:
        response.stream = _cut_stream_class(type(response).__module__)(response.stream)


@functools.cache
def _cut_stream_class(response_module: str) -> type:
    """A stream of the HTTP library's own kind (httpx, or httpx2 in newer SDKs; it takes
    no other) that ends after MAX_ERROR_BODY_BYTES."""
    library = importlib.import_module(response_module.partition(".")[0])

    class CutStream(library.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            left = MAX_ERROR_BODY_BYTES
            async for part in self._inner:
                yield part[:left]
                left -= len(part)
                if left <= 0:
                    return

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CutStream
