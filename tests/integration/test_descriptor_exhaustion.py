"""A server out of file descriptors (its ``ulimit -n`` reached by open connections):
it says so in a line, not in thousands, and serves again once descriptors are free."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from core_support import AppServer, wait_for

pytestmark = pytest.mark.integration

_SAID = "cannot accept connections: Too many open files"
# What Python's asyncio says for each refused accept, with a traceback.
_ASYNCIO_SAYS = "socket.accept() out of system resource"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[AppServer]:
    made = AppServer(tmp_path / "home")
    made.log_path = tmp_path / "server.log"
    made.start()
    yield made
    made.close()


def _healthy(server: AppServer) -> bool:
    try:
        return httpx.get(f"{server.base_url}/api/healthz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def test_refused_connections_are_said_in_one_line(server: AppServer) -> None:
    """Each refused accept was logged with a traceback, and retried, each retry
    refused and logged again: 140,000 lines in 8 s with 150 connections queued."""
    assert server.proc is not None
    process = psutil.Process(server.proc.pid)
    soft, hard = process.rlimit(psutil.RLIMIT_NOFILE)
    process.rlimit(psutil.RLIMIT_NOFILE, (process.num_fds() + 4, hard))
    held = []
    try:
        for _ in range(30):
            held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        wait_for(
            lambda: (
                _SAID in server.logs_tail(1 << 20) or _ASYNCIO_SAYS in server.logs_tail(1 << 20)
            ),
            what="the server to run out of descriptors",
        )
    finally:
        for sock in held:
            sock.close()
        process.rlimit(psutil.RLIMIT_NOFILE, (soft, hard))
    wait_for(lambda: _healthy(server), what="the server to answer again")
    log = server.log_path.read_text()
    assert log.count(_ASYNCIO_SAYS) == 0
    assert log.count(_SAID) == 1, server.logs_tail()
    assert "ulimit -n" in log
