"""The perimeter middleware in front of a tiny app, driven through httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from fastapi.testclient import TestClient

from tether.security.perimeter import (
    Perimeter,
    PerimeterPolicy,
    allowed_host_names,
    token_matches,
)

TOKEN = "s3cret-token"
LIMIT = 2048


def _app(token: str | None = TOKEN, extra_hosts: tuple[str, ...] = ()) -> Perimeter:
    app = FastAPI()

    @app.get("/api/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/things")
    async def things() -> list[str]:
        return ["a"]

    @app.post("/api/things")
    async def add(body: dict[str, str]) -> dict[str, int]:
        return {"keys": len(body)}

    @app.post("/api/things/poke")
    async def poke() -> dict[str, bool]:
        return {"poked": True}

    policy = PerimeterPolicy(token, allowed_host_names("127.0.0.1", extra_hosts), LIMIT)
    return Perimeter(app, policy)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://127.0.0.1:8088",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as c:
        yield c


async def test_healthz_needs_no_token(client: httpx.AsyncClient) -> None:
    resp = await client.get("/api/healthz", headers={"Authorization": ""})
    assert resp.status_code == 200


@pytest.mark.parametrize("auth", [None, "Bearer wrong", "Bearer ", "Basic czNjcmV0LXRva2Vu", TOKEN])
async def test_missing_or_wrong_token_is_401(client: httpx.AsyncClient, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth is not None else {}
    client.headers.pop("Authorization")
    resp = await client.get("/api/things", headers=headers)
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == "Bearer"
    assert TOKEN not in resp.text


async def test_right_token_by_header_or_cookie(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/things")).status_code == 200
    client.headers.pop("Authorization")
    resp = await client.get("/api/things", headers={"Cookie": f"a=b; tether_token={TOKEN}"})
    assert resp.status_code == 200


async def test_any_presented_token_cookie_may_be_the_right_one(client: httpx.AsyncClient) -> None:
    client.headers.pop("Authorization")
    for cookie in (
        f"tether_token=planted; tether_token={TOKEN}",
        f"tether_token={TOKEN}; tether_token=planted",
    ):
        assert (await client.get("/api/things", headers={"Cookie": cookie})).status_code == 200
    resp = await client.get("/api/things", headers={"Cookie": "tether_token=a; tether_token=b"})
    assert resp.status_code == 401


def test_token_comparison() -> None:
    assert token_matches(TOKEN, TOKEN)
    assert not token_matches(TOKEN, None)
    assert not token_matches(TOKEN, TOKEN[:-1])
    assert not token_matches(TOKEN, TOKEN + "x")
    assert not token_matches(TOKEN, "ü" * 3)


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "", "localhost.:80"])
async def test_foreign_host_is_403(client: httpx.AsyncClient, host: str) -> None:
    resp = await client.get("/api/things", headers={"Host": host})
    assert resp.status_code == 403
    # Even the public route: a DNS-rebinding page must not reach anything.
    assert (await client.get("/api/healthz", headers={"Host": host})).status_code == 403


@pytest.mark.parametrize("host", ["localhost:8088", "127.0.0.1", "[::1]:8088", "LOCALHOST"])
async def test_loopback_hosts_allowed(client: httpx.AsyncClient, host: str) -> None:
    assert (await client.get("/api/things", headers={"Host": host})).status_code == 200


async def test_configured_host_allowed() -> None:
    transport = httpx.ASGITransport(app=_app(extra_hosts=("tether.lan",)))
    async with httpx.AsyncClient(transport=transport, base_url="http://tether.lan:8088") as c:
        resp = await c.get("/api/things", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "http://127.0.0.1:9999", "http://localhost:8088"]
)
async def test_foreign_origin_cannot_write(client: httpx.AsyncClient, origin: str) -> None:
    resp = await client.post("/api/things", json={"a": "b"}, headers={"Origin": origin})
    assert resp.status_code == 403
    resp = await client.post("/api/things/poke", headers={"Origin": origin})
    assert resp.status_code == 403


async def test_own_origin_and_no_origin_can_write(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/api/things", json={"a": "b"}, headers={"Origin": "http://127.0.0.1:8088"}
    )
    assert resp.status_code == 200
    assert (await client.post("/api/things", json={"a": "b"})).status_code == 200


async def test_foreign_origin_may_not_read_either_without_token(client: httpx.AsyncClient) -> None:
    # Reads are not Origin-checked, but no CORS header is ever sent, so a page on
    # another origin cannot read the answer, and without the token there is none.
    resp = await client.get("/api/things", headers={"Origin": "http://evil.example"})
    assert resp.status_code == 200
    assert "access-control-allow-origin" not in resp.headers
    preflight = await client.options(
        "/api/things",
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
async def test_non_json_body_is_415(client: httpx.AsyncClient, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    resp = await client.post("/api/things", content=b'{"a": "b"}', headers=headers)
    assert resp.status_code == 415


async def test_json_with_charset_is_accepted(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/api/things",
        content=b'{"a": "b"}',
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert resp.status_code == 200


async def test_oversize_body_by_length_is_413(client: httpx.AsyncClient) -> None:
    resp = await client.post("/api/things", json={"a": "x" * LIMIT})
    assert resp.status_code == 413


async def test_oversize_chunked_body_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"a": "'
        for _ in range(10):
            yield b"x" * 512
        yield b'"}'

    resp = await client.post(
        "/api/things", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 413
    assert "larger than" in resp.json()["detail"]


async def test_body_at_the_limit_passes(client: httpx.AsyncClient) -> None:
    body = b'{"a": "' + b"x" * (LIMIT - 10) + b'"}'
    assert len(body) <= LIMIT
    resp = await client.post(
        "/api/things", content=body, headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 200


async def test_no_auth_policy_still_checks_host_and_origin() -> None:
    transport = httpx.ASGITransport(app=_app(token=None))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8088") as c:
        assert (await c.get("/api/things")).status_code == 200
        assert (await c.get("/api/things", headers={"Host": "evil.example"})).status_code == 403
        resp = await c.post("/api/things/poke", headers={"Origin": "http://evil.example"})
        assert resp.status_code == 403


def _ws_app() -> Perimeter:
    app = FastAPI()

    @app.websocket("/api/ws")
    async def echo(ws: WebSocket) -> None:
        await ws.accept()
        await ws.send_text(await ws.receive_text())
        await ws.close()

    return Perimeter(app, PerimeterPolicy(TOKEN, allowed_host_names("127.0.0.1", ()), LIMIT))


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "127.0.0.1:8088"},
        {"Host": "127.0.0.1:8088", "Authorization": "Bearer wrong"},
        {"Host": "evil.example", "Authorization": f"Bearer {TOKEN}"},
        {
            "Host": "127.0.0.1:8088",
            "Authorization": f"Bearer {TOKEN}",
            "Origin": "http://x.example",
        },
        {"Host": "127.0.0.1:8088", "Authorization": f"Bearer {TOKEN}", "Origin": "null"},
    ],
)
def test_websockets_get_the_same_checks(headers: dict[str, str]) -> None:
    client = TestClient(_ws_app(), base_url="http://127.0.0.1:8088")
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect("/api/ws", headers=headers),
    ):
        pass
    assert refused.value.code == 1008


def test_websocket_with_token_and_own_origin_connects() -> None:
    client = TestClient(_ws_app(), base_url="http://127.0.0.1:8088")
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Origin": "http://127.0.0.1:8088",
        "Host": "127.0.0.1:8088",
    }
    with client.websocket_connect("/api/ws", headers=headers) as ws:
        ws.send_text("hi")
        assert ws.receive_text() == "hi"
