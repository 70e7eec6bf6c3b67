"""The connection side of :mod:`tether.webhooks.egress`: an httpx transport whose
connections go only to addresses the egress policy allows, checked on the address
actually connected to, after the host name is resolved."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import urllib.request
from collections.abc import Iterable

import httpcore
import httpx

from tether.webhooks.egress import SETTING, Egress

log = logging.getLogger(__name__)


class DeniedAddress(httpcore.ConnectError):
    """Every address of the receiver's host is in a denied network."""

    def __init__(self, message: str = f"the receiver's address is in {SETTING}") -> None:
        super().__init__(message)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses that are not denied."""

    def __init__(self, egress: Egress) -> None:
        self._egress = egress
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host`` once, then try its allowed addresses in the resolver's order,
        each with an equal share of the connect timeout left (so one that does not
        answer, a broken IPv6 route say, leaves time for the next)."""
        try:
            found = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise httpcore.ConnectError(f"the receiver's host did not resolve: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        allowed = [a for a in addresses if not self._egress.denies(a)]
        if not allowed:
            raise DeniedAddress()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        failed: Exception | None = None
        for left, address in zip(range(len(allowed), 0, -1), allowed, strict=True):
            share = None if deadline is None else max(deadline - loop.time(), 0.0) / left
            try:
                return await self._inner.connect_tcp(
                    address, port, share, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failed = exc
        assert failed is not None
        raise failed

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise DeniedAddress("webhooks are not delivered over unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a pool that connects through :class:`GuardedBackend`.

    httpx takes no network backend, so the pool it builds is replaced by one built the
    same way with ours (TLS is still verified against the URL's host name: httpcore
    passes that, not the address, to the handshake). The egress tests fail if a later
    httpx stops using it."""

    def __init__(self, egress: Egress, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=100,  # httpx's default limits
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=GuardedBackend(egress),
        )


class EgressTransport(httpx.AsyncBaseTransport):
    """What deliveries go through: the proxy the environment names for a URL (as
    ``urllib`` reads HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY), after a check of
    URLs that name an address; every other URL through :class:`GuardedTransport`.

    httpx reads the proxy settings only when it is given no transport, so they are
    read here."""

    def __init__(self, egress: Egress) -> None:
        self._egress = egress
        # One context for every pool: loading the CA bundle costs ~30 ms of start-up.
        ssl_context = httpx.create_ssl_context()
        proxies = urllib.request.getproxies_environment()
        self._no_proxy = proxies.get("no", "")
        self._proxied: dict[str, httpx.AsyncHTTPTransport] = {}
        for scheme in ("http", "https"):
            proxy = proxies.get(scheme) or proxies.get("all")
            if proxy:
                # A proxy set as host:port is an http:// one, as httpx reads it.
                url = proxy if "://" in proxy else f"http://{proxy}"
                self._proxied[scheme] = httpx.AsyncHTTPTransport(verify=ssl_context, proxy=url)
        self._direct = GuardedTransport(egress, ssl_context)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        proxy = self._proxied.get(request.url.scheme)
        if proxy is None or _exempt(self._no_proxy, host):
            return await self._direct.handle_async_request(request)
        if self._egress.denies_host(host):
            denied = DeniedAddress()
            raise httpx.ConnectError(str(denied), request=request) from denied
        return await proxy.handle_async_request(request)

    async def aclose(self) -> None:
        for transport in (self._direct, *self._proxied.values()):
            try:
                await transport.aclose()
            except Exception:  # the others are still to be closed
                log.exception("closing a webhook transport failed")


def _exempt(no_proxy: str, host: str) -> bool:
    """Whether NO_PROXY (comma-separated names, each covering its subdomains too; ``*``
    for every host) sends ``host`` around the proxy."""
    host = host.lower().rstrip(".")
    for entry in no_proxy.split(","):
        name = entry.strip().lower().lstrip(".")
        before, _, port = name.rpartition(":")
        if port.isdigit() and before and ":" not in before:
            name = before  # host:port: the host, whatever the port (direct is checked)
        if name == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False
