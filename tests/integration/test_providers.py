"""/api/models: custom providers, their write-only keys and the active model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from core_support import Stack, stack_for_module

pytestmark = pytest.mark.integration

KEY = "sk-very-secret-provider-key-1234567890"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("providers")


def _provider(provider_id: str, **extra: object) -> dict[str, object]:
    return {
        "id": provider_id,
        "name": "Test provider",
        "default_base_url": "http://127.0.0.1:9/v1",
        "chat_model": "OpenAIChatModel",
        "models": [{"id": "m1", "name": "Model one"}, {"id": "m2"}],
        **extra,
    }


def test_add_provider_201_then_duplicate_409(stack: Stack) -> None:
    resp = stack.api("POST", "/api/models/custom-providers", json=_provider("p-add"))
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["id"] == "p-add" and body["is_custom"] and not body["has_api_key"]
    assert [m["id"] for m in body["extra_models"]] == ["m1", "m2"]
    again = stack.api("POST", "/api/models/custom-providers", json=_provider("p-add"))
    assert again.status_code == 409
    assert "p-add" in again.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        _provider("bad id with spaces"),
        _provider("p-x", default_base_url="not a url"),
        _provider("p-x", name=""),
        _provider("p-x", models="m1"),
        _provider("p-x", models=[{"name": "no id"}]),
        _provider("p-x", chat_model="AnthropicChatModel"),
        # Stored and listed in plain text, where api_key is sealed and masked.
        _provider("p-x", default_base_url=f"http://u:{KEY}@127.0.0.1:9/v1"),
    ],
    ids=[
        "empty",
        "bad-id",
        "bad-url",
        "empty-name",
        "models-not-list",
        "model-without-id",
        "other-protocol",
        "credentials-in-url",
    ],
)
def test_add_provider_422_on_bad_body_and_nothing_is_added(
    stack: Stack, body: dict[str, object]
) -> None:
    resp = stack.api("POST", "/api/models/custom-providers", json=body)
    assert resp.status_code == 422, resp.text
    ids = {p["id"] for p in stack.api("GET", "/api/models").json()}
    assert "p-x" not in ids and "bad id with spaces" not in ids


def test_configure_200_and_the_key_is_never_returned(stack: Stack) -> None:
    stack.api("POST", "/api/models/custom-providers", json=_provider("p-key"))
    resp = stack.api("PUT", "/api/models/p-key/config", json={"api_key": KEY})
    assert resp.status_code == 200, resp.text
    assert resp.json()["has_api_key"] is True
    assert KEY not in resp.text
    listing = stack.api("GET", "/api/models")
    assert listing.status_code == 200
    assert KEY not in listing.text and "api_key_encrypted" not in listing.text
    entry = next(p for p in listing.json() if p["id"] == "p-key")
    assert entry["has_api_key"] is True and entry["api_key"] == "******"
    assert KEY not in stack.server.logs_tail(1_000_000)


def test_configure_unknown_provider_404(stack: Stack) -> None:
    resp = stack.api("PUT", "/api/models/nope/config", json={"api_key": "x"})
    assert resp.status_code == 404
    assert stack.api("PUT", "/api/models/nope/config", json={}).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"api_key": 123},
        {"base_url": "ftp:/x"},
        {"unknown": 1},
        {"api_key": KEY * 200},
        {"base_url": f"https://user:{KEY}@api.example/v1"},
    ],
    ids=["key-not-string", "bad-url", "unknown-field", "key-too-long", "credentials-in-url"],
)
def test_configure_422_never_echoes_a_key(stack: Stack, body: dict[str, object]) -> None:
    stack.api("POST", "/api/models/custom-providers", json=_provider("p-422"))
    resp = stack.api("PUT", "/api/models/p-422/config", json=body)
    assert resp.status_code == 422, resp.text
    assert KEY not in resp.text


def test_clearing_the_key(stack: Stack) -> None:
    stack.api("POST", "/api/models/custom-providers", json=_provider("p-clear"))
    stack.api("PUT", "/api/models/p-clear/config", json={"api_key": KEY})
    resp = stack.api("PUT", "/api/models/p-clear/config", json={"api_key": ""})
    assert resp.status_code == 200 and resp.json()["has_api_key"] is False


def test_delete_200_then_404(stack: Stack) -> None:
    stack.api("POST", "/api/models/custom-providers", json=_provider("p-del"))
    assert stack.api("DELETE", "/api/models/custom-providers/p-del").status_code == 200
    assert stack.api("DELETE", "/api/models/custom-providers/p-del").status_code == 404
    ids = {p["id"] for p in stack.api("GET", "/api/models").json()}
    assert "p-del" not in ids


def test_set_active_200_404_422(stack: Stack) -> None:
    before = stack.api("GET", "/api/models/active").json()
    stack.api("POST", "/api/models/custom-providers", json=_provider("p-act"))
    unknown = stack.api("PUT", "/api/models/active", json=_slot("nope", "m1"))
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "Provider 'nope' not found"}
    bad_model = stack.api("PUT", "/api/models/active", json=_slot("p-act", "m9"))
    assert bad_model.status_code == 422
    assert "m9" in bad_model.json()["detail"]
    missing = stack.api("PUT", "/api/models/active", json={"provider_id": "p-act"})
    assert missing.status_code == 422
    no_scope = stack.api("PUT", "/api/models/active", json={"provider_id": "p-act", "model": "m2"})
    assert no_scope.status_code == 422  # QwenPaw requires the scope
    assert stack.api("GET", "/api/models/active").json() == before  # nothing changed
    ok = stack.api("PUT", "/api/models/active", json=_slot("p-act", "m2"))
    assert ok.status_code == 200, ok.text
    expected = {"active_llm": {"provider_id": "p-act", "model": "m2"}}
    assert ok.json() == {**expected, "effective_max_input_length": None}
    for scope in ("effective", "global"):
        got = stack.api("GET", f"/api/models/active?scope={scope}").json()
        assert got["active_llm"] == expected["active_llm"]


def _slot(provider_id: str, model: str) -> dict[str, str]:
    return {"provider_id": provider_id, "model": model, "scope": "global"}
