"""A connection test for a provider: one tiny completion, reported as ok or an error."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tether.llm.client import load_sdk
from tether.llm.errors import provider_message, unreachable


@dataclass(frozen=True)
class ProbeResult:
    """What a connection test found; ``error`` is a sentence a person can act on."""

    ok: bool
    model: str
    latency_ms: int
    error: str | None = None


async def probe_model(base_url: str, api_key: str, model: str, time_limit: float) -> ProbeResult:
    """Ask ``model`` for a 1-token completion (streamed, no retries) and report the outcome."""
    await load_sdk()
    import openai

    client = openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or "unset", max_retries=0, timeout=time_limit
    )
    started = time.monotonic()
    try:
        stream = await client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Reply with OK."}],
            max_tokens=1,
            stream=True,
        )
        async for _chunk in stream:
            pass
    except openai.APIStatusError as exc:
        error = f"the provider answered {exc.status_code}: {provider_message(exc)}"
        return ProbeResult(False, model, _since(started), error)
    except openai.APIConnectionError as exc:  # a timeout is one too
        return ProbeResult(False, model, _since(started), unreachable(base_url, exc))
    except openai.APIError as exc:
        return ProbeResult(False, model, _since(started), f"the provider failed: {exc.message}")
    finally:
        await client.close()
    return ProbeResult(True, model, _since(started))


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
