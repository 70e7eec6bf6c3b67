"""The API perimeter, as one ASGI middleware: Host allow-list, token, Origin, content
type and body size. Pure ASGI (not BaseHTTPMiddleware) so streaming stays untouched."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE_NAME = "tether_token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_PUBLIC_PATHS = frozenset({"/api/healthz"})
_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class PerimeterPolicy:
    token: str | None  # None: no auth (loopback only, enforced at start-up)
    allowed_hosts: frozenset[str]
    max_body_bytes: int


def allowed_host_names(bind_host: str, extra: Iterable[str]) -> frozenset[str]:
    """Loopback names, the bound address (unless a wildcard) and configured names."""
    names = set(LOOPBACK_NAMES) | {h.lower() for h in extra}
    if bind_host not in ("0.0.0.0", "::", ""):
        names.add(bind_host.lower().strip("[]"))
    return frozenset(names)


def _host_name(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def header_map(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name. Repeated Cookie headers (HTTP/2 splits
    them) are joined, so no cookie is lost; for other names the last one counts."""
    headers: dict[str, str] = {}
    for raw_key, raw_value in scope.get("headers", []):
        key, value = raw_key.decode("latin-1").lower(), raw_value.decode("latin-1")
        if key == "cookie" and key in headers:
            value = f"{headers[key]}; {value}"
        headers[key] = value
    return headers


def _cookies(header: str, name: str) -> list[str]:
    values = []
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            values.append(value)
    return values


def presented_tokens(headers: dict[str, str]) -> list[str]:
    """The bearer token if there is one, else every ``tether_token`` cookie. A page on
    another port of the same host can plant its own ``tether_token`` cookie with a longer
    path, which the browser then sends first; the real one must still count."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return [auth[7:].strip()]
    return _cookies(headers.get("cookie", ""), COOKIE_NAME)


def token_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison, so timing does not leak the token."""
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def authenticated(expected: str, headers: dict[str, str]) -> bool:
    """Whether any presented token is ``expected``. Every one is compared (no early
    exit), so timing says nothing about which one matched."""
    results = [token_matches(expected, given) for given in presented_tokens(headers)]
    return any(results)


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _guarded(scope: Scope) -> bool:
    """Whether the route needs the token (every /api route but the public ones, and
    Tether's MCP endpoint)."""
    path: str = scope["path"]
    if path == "/mcp" or path.startswith("/mcp/"):
        return True
    return path.startswith("/api/") and path not in _PUBLIC_PATHS


class Perimeter:
    def __init__(self, app: ASGIApp, policy: PerimeterPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._guard_websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = header_map(scope)
        problem = self._check(scope, headers)
        if problem is not None:
            await _refuse(send, *problem)
            return
        await self._forward_limited(scope, receive, send)

    async def _guard_websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The same Host and token checks, and an Origin check on every connection (a
        browser opens a WebSocket to any site without a preflight)."""
        headers = header_map(scope)
        problem = self._check_access(scope, headers) or self._check_origin(headers)
        if problem is None:
            await self.app(scope, receive, send)
            return
        await receive()  # websocket.connect
        # Closing before accepting makes the server answer the handshake with 403.
        await send({"type": "websocket.close", "code": 1008, "reason": problem[1]})

    def _check(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        problem = self._check_access(scope, headers)
        if problem is None and scope["method"] in _STATE_CHANGING and _guarded(scope):
            return self._check_write(headers)
        return problem

    def _check_access(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = _host_name(headers.get("host", ""))
        if host not in self.policy.allowed_hosts:
            return 403, "Host not allowed (set TETHER_ALLOWED_HOSTS to accept it)"
        if not _guarded(scope):
            return None
        if self.policy.token is not None and not authenticated(self.policy.token, headers):
            return 401, "Missing or invalid token"
        return None

    def _check_origin(self, headers: dict[str, str]) -> tuple[int, str] | None:
        origin = headers.get("origin")
        if origin is None:
            return None
        netloc = urlsplit(origin).netloc
        if (
            origin == "null"
            or _host_name(netloc) not in self.policy.allowed_hosts
            or netloc.lower() != headers.get("host", "").lower()
        ):
            return 403, "Cross-origin request refused"
        return None

    def _check_write(self, headers: dict[str, str]) -> tuple[int, str] | None:
        problem = self._check_origin(headers)
        if problem is not None:
            return problem
        length = headers.get("content-length")
        has_body = (length is not None and length != "0") or "transfer-encoding" in headers
        if length is not None and length.isdigit() and int(length) > self.policy.max_body_bytes:
            return 413, f"Request body larger than {self.policy.max_body_bytes} bytes"
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if has_body and content_type != "application/json":
            return 415, "Request body must be JSON (Content-Type: application/json)"
        return None

    async def _forward_limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, answering 413 once its body (chunked or lying about its
        length) grows past the limit. The app is then told the client went away, and
        whatever it answers is dropped: the 413 has been sent."""
        limit, seen = self.policy.max_body_bytes, 0
        started = refused = False

        async def limited_receive() -> Message:
            nonlocal seen, refused, started
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    refused = True
                    if not started:
                        started = True
                        await _refuse(send, 413, f"Request body larger than {limit} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, limited_receive, guarded_send)
