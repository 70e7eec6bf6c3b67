"""The connection side of :mod:`tether.webhooks.egress`: an httpx transport whose
connections go only to addresses the egress policy allows, checked on the address
actually connected to, after the host name is resolved."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable

import httpcore
import httpx

from tether.webhooks.egress import SETTING, Egress


class DeniedAddress(httpcore.ConnectError):
    """Every address of the receiver's host is in a denied network."""


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
        try:
            found = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise httpcore.ConnectError(f"the receiver's host did not resolve: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        allowed = [a for a in addresses if not self._egress.denies(a)]
        if not allowed:
            raise DeniedAddress(f"the receiver's address is in {SETTING}")
        failed: httpcore.ConnectError | None = None
        for address in allowed:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
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

    def __init__(self, egress: Egress) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=100,  # httpx's default limits
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=GuardedBackend(egress),
        )
