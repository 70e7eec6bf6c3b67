"""Talking to an OpenAI-compatible chat endpoint through the openai SDK, streaming."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from tether import late_imports
from tether.llm.bounded_http import bounded_http_client
from tether.llm.capabilities import capabilities_for
from tether.llm.errors import provider_message, unreachable
from tether.llm.reply import AssistantReply, IncompleteReply, ModelError, RequestedCall
from tether.llm.sse import MAX_EVENT_BYTES, Event, take_events
from tether.llm.stream import StreamAssembler, event_chunk, not_a_chunk, whole_body_chunks
from tether.llm.wire import request_messages
from tether.security.secret_text import masked_text

if TYPE_CHECKING:
    from openai import AsyncOpenAI

TextSink = Callable[[str], None]


class ChatModel(Protocol):
    """What the agent needs from a model: one streamed completion.

    ``messages`` are stored messages (with Tether's ``x_`` keys); the model decides what
    of them its provider gets (see ``llm.wire``).
    """

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextSink,
        on_reasoning: TextSink | None = None,
    ) -> AssistantReply: ...


async def load_sdk() -> None:
    """Import the openai SDK (about 0.35 s) off the event loop: the first model request
    or connection test does, not start-up (see late_imports)."""
    await late_imports.load("openai")


class OpenAIChatModel:
    """A model behind an OpenAI-compatible endpoint. The SDK retries 429 and 5xx with
    exponential backoff (``max_retries``), honouring Retry-After. ``timeout`` is the
    longest wait for the connection or between two pieces of a reply; ``deadline`` (None:
    none) bounds one reply in all, those retries and their waits included.

    The SDK is imported, in a worker thread, and its client made at the first request:
    imported at start-up it cost the start 0.35 s and the idle server 13 MB, and
    imported in the turn's own thread it held the event loop for 0.6-0.8 s."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        max_retries: int,
        timeout: float,
        deadline: float | None = None,
    ) -> None:
        self.model = model
        self._base_url = base_url
        self._deadline = deadline
        self.caps = capabilities_for(base_url)
        # Which provider wrote a message: provider-specific fields go back only to it. A
        # digest, since a base URL may carry a key in its query.
        self.origin = hashlib.sha256(f"{base_url}\n{model}".encode()).hexdigest()[:16]
        self._options: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key or "unset",
            "max_retries": max_retries,
            "timeout": timeout,
        }
        self._client: AsyncOpenAI | None = None

    async def _sdk_client(self) -> AsyncOpenAI:
        if self._client is None:
            await load_sdk()
        if self._client is None:  # the first of the requests that waited makes it
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(**self._options, http_client=bounded_http_client())
            self._options.clear()  # the key lives in the client only
        return self._client

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextSink,
        on_reasoning: TextSink | None = None,
    ) -> AssistantReply:
        wire = request_messages(messages, self.origin, self.caps)
        body: dict[str, Any] = {"model": self.model, "messages": wire, "stream": True}
        if tools:
            body["tools"] = list(tools)
        assembler = await self._read_reply(body, on_text, on_reasoning)
        reply = assembler.finish()
        return replace(reply, echo={**reply.echo, "origin": self.origin})

    async def probe(self, prompt: str, token_field: str = "max_tokens") -> None:
        """Ask for a 1-token completion of ``prompt`` (the cap sent as ``token_field``)
        and read it to its end as a turn reads a reply; ModelError says what failed. The
        reply itself is not judged (one token may well be no answer), only that it is a
        completion."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            token_field: 1,
            "stream": True,
        }
        assembler = await self._read_reply(body, _ignored, None)
        if not assembler.started:
            raise ModelError("the model provider's reply held no streamed completion")

    async def aclose(self) -> None:
        """Close the connections the SDK's client holds, if it was made."""
        if self._client is not None:
            await self._client.close()

    async def _read_reply(
        self, body: dict[str, Any], on_text: TextSink, on_reasoning: TextSink | None
    ) -> StreamAssembler:
        """Send ``body`` and assemble the reply; any failure is a ModelError saying what
        went wrong, in the provider's words where it gave some."""
        try:
            client = await self._sdk_client()
        except ImportError as exc:
            raise ModelError(
                f"the openai SDK could not be loaded ({exc}); reinstall Tether"
            ) from exc
        import openai

        assembler = StreamAssembler(self.caps)
        # A stream that sends keep-alives, or a byte now and then, never waits long
        # enough between pieces for ``timeout``; only a bound on the whole ends it.
        deadline = asyncio.timeout(self._deadline)
        try:
            async with deadline:
                await self._stream(client, assembler, body, on_text, on_reasoning)
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise _past_deadline(self._deadline, assembler.started) from exc
        except openai.APIStatusError as exc:
            said = provider_message(exc, [client.api_key])
            raise ModelError(f"the model provider answered {exc.status_code}: {said}") from exc
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise _connection_error(exc, assembler.started, self._base_url) from exc
        except openai.APIError as exc:
            said = provider_message(exc, [client.api_key])
            raise ModelError(f"the model provider failed: {said}") from exc
        except ModelError as exc:  # an error object in the stream, in the provider's words
            masked = masked_text(str(exc), [client.api_key])
            if masked != str(exc):
                raise type(exc)(masked) from exc
            raise
        except json.JSONDecodeError as exc:
            raise ModelError(
                "the model provider sent a stream line that is not JSON; "
                "nothing of that reply was kept"
            ) from exc
        except Exception as exc:
            if _is_transport_error(exc):
                raise _connection_error(exc, assembler.started, self._base_url) from exc
            raise
        return assembler

    async def _stream(
        self,
        client: AsyncOpenAI,
        assembler: StreamAssembler,
        body: dict[str, Any],
        on_text: TextSink,
        on_reasoning: TextSink | None,
    ) -> None:
        from openai import AsyncStream

        # The SDK's low-level post, not chat.completions.create: create() walks every
        # message and tool through its typed-dict transform first (3 ms of the event loop
        # per request, more as the history grows) for dicts already in the wire format,
        # and typed chunks were turned back into dicts for the assembler. Chunks come as
        # the provider's dicts (stream type ``object``); retries and errors are the same.
        stream = await client.post(
            "/chat/completions",
            body=body,
            cast_to=object,
            stream=True,
            stream_cls=AsyncStream[object],
        )

        def take(chunk: object) -> None:
            if not isinstance(chunk, dict):
                raise not_a_chunk(chunk)
            added = assembler.feed(chunk)
            if added.reasoning and on_reasoning is not None:
                on_reasoning(added.reasoning)
            if added.text:
                on_text(added.text)

        def take_event(event: Event) -> None:
            take(event_chunk(event))

        response = stream.response
        try:
            if _labelled_json(response):
                # Not a stream: a gateway that ignored stream=true, or an error with a 200.
                for chunk in whole_body_chunks(await _whole_body(response)):
                    take(chunk)
            else:
                # Read by Tether, not by iterating ``stream``: see llm.sse.
                await take_events(response.aiter_bytes(), take_event)
        finally:
            await response.aclose()


def _ignored(_text: str) -> None:
    pass


#: The largest reply taken as one JSON body (a whole completion, JSON-escaped): as large
#: as one event of a stream may be.
MAX_WHOLE_BODY_BYTES = MAX_EVENT_BYTES


def _labelled_json(response: Any) -> bool:
    kind = str(response.headers.get("content-type", "")).split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


async def _whole_body(response: Any) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for part in response.aiter_bytes():
        size += len(part)
        if size > MAX_WHOLE_BODY_BYTES:
            raise ModelError(
                f"the model provider's answer passed {MAX_WHOLE_BODY_BYTES:,} bytes "
                "and was cut off there"
            )
        parts.append(part)
    return b"".join(parts)


def _connection_error(exc: Exception, started: bool, base_url: str) -> ModelError:
    if started:
        return ModelError(
            "the connection to the model provider broke during its reply "
            f"({type(exc).__name__}); nothing of that reply was kept"
        )
    return ModelError(unreachable(base_url, exc))


def _past_deadline(seconds: float | None, started: bool) -> ModelError:
    limit = f"{seconds:g} s, the most one reply may take (TETHER_LLM_REPLY_DEADLINE_SECONDS)"
    if started:
        return ModelError(
            f"the model provider's reply was still coming after {limit}; it was stopped "
            "there and nothing of it was kept"
        )
    return ModelError(
        f"the model provider had not begun its reply after {limit}, retries included; "
        "it was stopped there"
    )


def _is_transport_error(exc: Exception) -> bool:
    # The SDK lets errors of its HTTP library (httpx, or httpx2 in newer releases) escape
    # while a stream is read; matched by module so either library is covered.
    return type(exc).__module__.split(".")[0] in {"httpx", "httpx2", "httpcore", "httpcore2"}


__all__ = [
    "AssistantReply",
    "ChatModel",
    "IncompleteReply",
    "ModelError",
    "OpenAIChatModel",
    "RequestedCall",
]
