"""The console's HTTP side: login by the token URL, the page, its static files, the
optional-API probe and the provider connection test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from helpers import MockLLMHandler, register_mock_provider

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mock_llm() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), MockLLMHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _get(app_server: Any, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(app_server.base_url + path, timeout=10, **kwargs)


def test_without_a_cookie_the_page_only_says_how_to_log_in(app_server: Any) -> None:
    resp = _get(app_server, "/")
    assert resp.status_code == 200
    assert "Open the URL printed by" in resp.text
    assert "main.js" not in resp.text


def test_a_wrong_token_is_refused_and_sets_no_cookie(app_server: Any) -> None:
    resp = _get(app_server, "/?token=not-the-token")
    assert resp.status_code == 401
    assert "set-cookie" not in resp.headers


def test_the_token_url_sets_a_strict_httponly_cookie_and_redirects_to_the_bare_url(
    app_server: Any,
) -> None:
    resp = _get(app_server, f"/?token={app_server.token}")
    assert resp.status_code == 303
    assert resp.headers["location"] == "/"
    cookie = resp.headers["set-cookie"].lower()
    assert cookie.startswith(f"tether_token={app_server.token}".lower())
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert "path=/" in cookie


def test_with_the_cookie_the_app_is_served_with_a_strict_csp(app_server: Any) -> None:
    resp = _get(app_server, "/", cookies={"tether_token": app_server.token})
    assert resp.status_code == 200
    assert '<script type="module" src="/static/main.js">' in resp.text
    assert "script-src 'self'" in resp.headers["content-security-policy"]
    assert resp.headers["cache-control"] == "no-store"
    js = _get(app_server, "/static/main.js")
    assert js.status_code == 200
    assert "javascript" in js.headers["content-type"]


def test_no_page_on_the_consoles_origin_runs_third_party_scripts(app_server: Any) -> None:
    """FastAPI's /docs and /redoc load unpinned scripts from a CDN on the origin whose
    cookie drives the agent: they are not served; the schema is."""
    cookies = {"tether_token": app_server.token}
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert _get(app_server, path, cookies=cookies).status_code == 404, path
    schema = _get(app_server, "/openapi.json", cookies=cookies)
    assert schema.status_code == 200 and schema.json()["info"]["title"] == "Tether"


def test_the_cookie_authenticates_api_calls(app_server: Any) -> None:
    resp = _get(app_server, "/api/console/features", cookies={"tether_token": app_server.token})
    assert resp.status_code == 200
    assert resp.json() == {"approvals": True, "cron": True}
    assert _get(app_server, "/api/console/features").status_code == 401


def test_a_planted_cookie_does_not_shadow_the_real_one(app_server: Any) -> None:
    """A page on another port of the same host can set its own tether_token cookie with
    path=/api; the browser then sends it first. The real cookie after it still counts."""
    planted = {"Cookie": f"tether_token=planted-by-another-origin; tether_token={app_server.token}"}
    assert _get(app_server, "/api/console/features", headers=planted).status_code == 200
    assert _get(app_server, "/api/chats", headers=planted).status_code == 200
    page = _get(app_server, "/", headers=planted)
    assert '<script type="module" src="/static/main.js">' in page.text
    only_planted = {"Cookie": "tether_token=planted-by-another-origin; tether_token="}
    assert _get(app_server, "/api/chats", headers=only_planted).status_code == 401
    # Logging in again sets the real cookie anew, and with the planted one still there
    # the console works.
    login = _get(app_server, f"/?token={app_server.token}")
    assert login.status_code == 303
    fresh = login.headers["set-cookie"].split(";")[0]
    headers = {"Cookie": f"tether_token=planted-by-another-origin; {fresh}"}
    assert _get(app_server, "/api/chats", headers=headers).status_code == 200


def test_connection_test_reports_ok_through_the_provider(app_server: Any, mock_llm: Any) -> None:
    url = f"http://127.0.0.1:{mock_llm.server_address[1]}/v1"
    provider = register_mock_provider(app_server, url, provider_id="probe-mock")
    mock_llm.requests = []
    resp = app_server.api_request("POST", f"/api/models/{provider}/test")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["ok"] is True
    assert body["error"] is None
    assert body["model"] == "mock-model"
    (request,) = mock_llm.requests
    assert request["max_tokens"] == 1
    assert "sk-mock" not in resp.text


def test_connection_test_reports_the_providers_error(app_server: Any, mock_llm: Any) -> None:
    mock_llm.replies = [{"status": 401, "message": "bad key"}]
    resp = app_server.api_request("POST", "/api/models/probe-mock/test")
    assert resp.status_code == 200
    body = resp.json()
    assert body["ok"] is False
    assert "401" in body["error"]
    assert "bad key" in body["error"]


def test_connection_test_of_an_unknown_provider_is_404(app_server: Any) -> None:
    resp = app_server.api_request("POST", "/api/models/nope/test")
    assert resp.status_code == 404
