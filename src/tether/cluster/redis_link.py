"""The connection to the cluster's Redis, and the names of the keys this cluster uses.

Redis carries what must reach another node now: live output and requests to the node
that runs a call. The database stays the source of truth; nothing in Redis is needed to
recover from a crash, so Redis keeps nothing on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

from tether.errors import Unavailable

log = logging.getLogger(__name__)


class RedisLink:
    """A Redis client and this cluster's key names (every key starts with ``prefix:``)."""

    def __init__(self, client: Any, prefix: str) -> None:
        self.client = client
        self.prefix = prefix

    @classmethod
    async def connect(cls, url: str, prefix: str) -> RedisLink:
        """Connect and check Redis answers (Unavailable with the reason if not)."""
        try:
            import redis.asyncio as aioredis
        except ModuleNotFoundError as exc:  # the cluster extra is optional
            raise Unavailable(
                "TETHER_REDIS_URL is set but the redis package is not installed: "
                "pip install 'tether[cluster]'"
            ) from exc
        client = aioredis.from_url(url, decode_responses=True, health_check_interval=30)
        try:
            await client.ping()
        except Exception as exc:
            await client.aclose()
            raise Unavailable(f"cannot reach Redis at {shown_redis_url(url)}: {exc}") from exc
        return cls(client, prefix)

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    @contextlib.contextmanager
    def reaching(self, what: str) -> Iterator[None]:
        """Raise a Redis outage inside (refused, reset, timed out: Redis is down, paused
        or restarting) as Unavailable, saying it could not ``what``, so a person asking
        gets a clear 502 rather than the fault a raw client error would be."""
        from redis.exceptions import RedisError

        try:
            yield
        except RedisError as exc:
            raise Unavailable(f"could not {what}: Redis did not answer ({exc})") from exc

    @contextlib.asynccontextmanager
    async def reaching_by(self, what: str, deadline: float) -> AsyncIterator[None]:
        """As :meth:`reaching`, and a Redis that has not answered by ``deadline`` (the
        event loop's clock) is one that did not answer: a stalled Redis holds a command
        until the client's socket timeout, which may lie well past what the caller
        promised to wait."""
        try:
            async with asyncio.timeout_at(deadline):
                with self.reaching(what):
                    yield
        except TimeoutError as exc:
            raise Unavailable(f"could not {what}: Redis did not answer in time") from exc

    async def close(self) -> None:
        await self.client.aclose()


def shown_redis_url(url: str) -> str:
    """The URL with any password hidden, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user + ':' if user else ''}***@{host}"
