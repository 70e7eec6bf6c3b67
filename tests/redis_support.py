"""The Redis the cluster tests use (``TETHER_TEST_REDIS``, default 127.0.0.1:6379).

Each test gets a key prefix of its own and deletes its keys afterwards, so tests never
see each other's streams or requests. On CI (``CI=true``) a Redis that cannot be reached
fails the test; elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

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


class OwnRedis:
    """A Redis server of one test's own, which it may stop, start again and pause (the
    shared one other tests use must never be): ``redis-server`` on a free port, keeping
    nothing on disk, as a deployment's Redis does not need to."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def required(cls, workdir: Path) -> OwnRedis:
        """One, started (skipped, or failed on CI, without ``redis-server``)."""
        if shutil.which("redis-server") is None:
            problem = "redis-server is needed to run a Redis of the test's own"
            if on_ci():
                pytest.fail(problem)
            pytest.skip(problem)
        server = cls(workdir)
        server.start()
        return server

    @classmethod
    @contextlib.contextmanager
    def running(cls, workdir: Path) -> Iterator[OwnRedis]:
        """Body of a fixture: one, started, and killed after (see ``required``)."""
        server = cls.required(workdir)
        try:
            yield server
        finally:
            server.stop()

    def start(self) -> None:
        """Start it (again, on the same port) and wait until it answers."""
        import redis

        self.workdir.mkdir(parents=True, exist_ok=True)
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        self._proc = subprocess.Popen(
            ["redis-server", *args, "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if self._proc.poll() is not None or time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        """Kill it (a crash: what it held is gone)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def answers(self) -> None:
        """Return once it answers a command again (at the end of a pause)."""
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=30)
        try:
            client.ping()
        finally:
            client.close()

    def pause(self, milliseconds: int) -> None:
        """Hold every client's commands for ``milliseconds`` (as a stalled Redis would)."""
        import redis

        client = redis.Redis.from_url(self.url)
        try:
            client.client_pause(milliseconds, all=True)
        finally:
            client.close()
