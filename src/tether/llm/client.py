"""Talking to an OpenAI-compatible chat endpoint through the openai SDK, streaming."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class ModelError(Exception):
    """The provider failed or returned something unusable; the message says what."""


@dataclass(frozen=True)
class RequestedCall:
    """One tool call in the model's reply."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class AssistantReply:
    text: str
    tool_calls: list[RequestedCall] = field(default_factory=list)


class ChatModel(Protocol):
    """What the agent needs from a model: one streamed completion."""

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: Callable[[str], None],
    ) -> AssistantReply: ...


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIChatModel:
    """A model behind an OpenAI-compatible endpoint. The SDK retries 429 and 5xx with
    exponential backoff (``max_retries``)."""

    def __init__(
        self, base_url: str, api_key: str, model: str, max_retries: int, timeout: float
    ) -> None:
        # Imported here: the SDK takes a noticeable share of start-up time and is only
        # needed once a turn runs.
        from openai import AsyncOpenAI

        self.model = model
        self._client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "unset", max_retries=max_retries, timeout=timeout
        )

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: Callable[[str], None],
    ) -> AssistantReply:
        import openai

        try:
            return await self._stream(messages, tools, on_text)
        except openai.APIStatusError as exc:
            raise ModelError(
                f"the model provider answered {exc.status_code}: {provider_message(exc)}"
            ) from exc
        except openai.APIError as exc:
            raise ModelError(f"the model provider failed: {exc.message}") from exc

    async def _stream(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: Callable[[str], None],
    ) -> AssistantReply:
        kwargs: dict[str, Any] = {"model": self.model, "messages": list(messages), "stream": True}
        if tools:
            kwargs["tools"] = list(tools)
        stream = await self._client.chat.completions.create(**kwargs)
        text: list[str] = []
        calls: dict[int, _PartialCall] = {}
        async for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    on_text(delta.content)
                for tc in delta.tool_calls or []:
                    _merge_call(calls.setdefault(tc.index, _PartialCall()), tc)
        return AssistantReply(
            text="".join(text),
            tool_calls=[_finish_call(i, calls[i]) for i in sorted(calls)],
        )


def _merge_call(partial: _PartialCall, delta: Any) -> None:
    if delta.id:
        partial.id = delta.id
    if delta.function is not None:
        if delta.function.name:
            partial.name += delta.function.name
        if delta.function.arguments:
            partial.arguments.append(delta.function.arguments)


def _finish_call(index: int, partial: _PartialCall) -> RequestedCall:
    if not partial.name:
        raise ModelError("the model sent a tool call without a function name")
    return RequestedCall(
        id=partial.id or f"call_{index}", name=partial.name, arguments="".join(partial.arguments)
    )


def provider_message(exc: Any) -> str:
    """The readable part of an SDK error (the provider's own message when it sent one)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(getattr(exc, "message", exc))
