"""The Redis the cluster tests use (``TETHER_TEST_REDIS``, default 127.0.0.1:6379).

Each test gets a key prefix of its own and deletes its keys afterwards, so tests never
see each other's streams or requests. On CI (``CI=true``) a Redis that cannot be reached
fails the test; elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import os
import uuid

import pytest

from database_support import on_ci

_SERVER = os.environ.get("TETHER_TEST_REDIS", "127.0.0.1:6379")


def redis_url() -> str:
    return f"redis://{_SERVER}/0"


def require_redis() -> None:
    """Skip (fail on CI) when no Redis answers."""
    import redis

    try:
        client = redis.Redis.from_url(redis_url(), socket_timeout=3)
        client.ping()
        client.close()
    except Exception as exc:
        problem = f"Redis at {_SERVER} is needed: {exc}"
        if on_ci():
            pytest.fail(problem)
        pytest.skip(problem)


def new_prefix() -> str:
    return f"tether-test-{uuid.uuid4().hex[:12]}"


def keys_under(prefix: str) -> list[str]:
    import redis

    client = redis.Redis.from_url(redis_url(), decode_responses=True)
    try:
        return sorted(client.scan_iter(match=f"{prefix}:*", count=1000))
    finally:
        client.close()


def drop_prefix(prefix: str) -> None:
    """Delete every key under ``prefix``."""
    import redis

    client = redis.Redis.from_url(redis_url())
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
