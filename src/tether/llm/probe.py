"""A connection test for a provider: one tiny completion, reported as ok or an error."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from tether.llm.client import OpenAIChatModel, load_sdk
from tether.llm.reply import ModelError

_PROMPT = "Reply with OK."


@dataclass(frozen=True)
class ProbeResult:
    """What a connection test found; ``error`` is a sentence a person can act on."""

    ok: bool
    model: str
    latency_ms: int
    error: str | None = None


async def probe_model(base_url: str, api_key: str, model: str, time_limit: float) -> ProbeResult:
    """Ask ``model`` for a 1-token completion (streamed, no retries), read as a turn reads
    a reply, within ``time_limit`` in all, and report the outcome."""
    await load_sdk()
    chat = OpenAIChatModel(base_url, api_key, model, max_retries=0, timeout=time_limit)
    started = time.monotonic()
    try:
        async with asyncio.timeout(time_limit):
            await _probe(chat)
    except ModelError as exc:
        return ProbeResult(False, model, _since(started), str(exc))
    except TimeoutError:
        # A stream of keep-alives is never quiet long enough for ``timeout``.
        error = f"the model provider had not finished a 1-token reply after {time_limit:g} s"
        return ProbeResult(False, model, _since(started), error)
    finally:
        await chat.aclose()
    return ProbeResult(True, model, _since(started))


async def _probe(chat: OpenAIChatModel) -> None:
    try:
        await chat.probe(_PROMPT)
    except ModelError as exc:
        # OpenAI's reasoning models (o1, o3, GPT-5) refuse max_tokens with a 400 that
        # names the field they take instead; other providers may not know that one.
        if "max_completion_tokens" not in str(exc):
            raise
        await chat.probe(_PROMPT, token_field="max_completion_tokens")


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
