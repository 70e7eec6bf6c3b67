"""The model's SDK client is made once, by whichever first request gets there."""

from __future__ import annotations

import asyncio
import resource
import socket

import pytest

from tether.llm.client import OpenAIChatModel
from tether.llm.probe import probe_model
from tether.llm.reply import ModelError


async def test_concurrent_first_requests_share_one_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # Turns of many sessions start together after a restart; each must reach the
    # provider (here: a port nothing listens on) with the configured key and URL, not
    # what the SDK would take from the environment without them.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIChatModel(f"http://127.0.0.1:{port}/v1", "sk-unit-0123456789", "m", 0, 5)
    results = await asyncio.gather(
        *(
            model.complete([{"role": "user", "content": "hi"}], [], lambda _t: None)
            for _ in range(5)
        ),
        return_exceptions=True,
    )
    assert len(results) == 5
    for result in results:
        assert isinstance(result, ModelError), repr(result)
        assert "could not be reached" in str(result)
    with pytest.raises(ModelError, match="could not be reached"):
        await model.complete([{"role": "user", "content": "again"}], [], lambda _t: None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_unreachable_provider_is_named_by_address_and_cause() -> None:
    # "could not be reached (APIConnectionError)" left an operator guessing which of the
    # providers' addresses failed, and why. The rest of the URL may hold a key: not shown.
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1?key=sk-query-0123456789"
    model = OpenAIChatModel(url, "sk-unit-0123456789", "m", 0, 5)
    with pytest.raises(ModelError) as caught:
        await model.complete([{"role": "user", "content": "hi"}], [], lambda _t: None)
    said = str(caught.value)
    assert f"the model provider at http://127.0.0.1:{port}/… could not be reached (" in said
    assert "refused" in said.lower() or "connect" in said.lower(), said
    assert "sk-query" not in said and "sk-unit" not in said


async def test_a_connection_test_of_an_unreachable_provider_names_its_address() -> None:
    port = _free_port()
    result = await probe_model(f"http://127.0.0.1:{port}/v1", "sk-unit-0123456789", "m", 5)
    assert not result.ok
    assert result.error is not None
    assert f"the model provider at http://127.0.0.1:{port}/… could not be reached (" in (
        result.error
    )


async def test_an_unreachable_provider_is_said_with_the_systems_reason() -> None:
    """The system's words when a system error lies beneath: a provider that refuses, and
    this server out of descriptors (its own limit, not the provider's fault)."""
    model = OpenAIChatModel(f"http://127.0.0.1:{_free_port()}/v1", "sk-unit-0123", "m", 0, 5)
    with pytest.raises(ModelError, match=r"could not be reached \(Connection refused\)$"):
        await model.complete([{"role": "user", "content": "hi"}], [], lambda _t: None)
    # Now with no descriptor left for a socket (the limit below those already open):
    # this process's own limit, not the provider's fault, and said so.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))
    try:
        with pytest.raises(ModelError) as raised:
            await model.complete([{"role": "user", "content": "hi"}], [], lambda _t: None)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert "Too many open files on this server)" in str(raised.value)
