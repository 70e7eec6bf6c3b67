"""Guards for every test: nothing reaches a real model or the internet."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from database_support import database_url_for, drop_created, on_ci, on_postgresql, reachable
from leftovers import kill_left_behind, mark_this_run

_real_connect = socket.socket.connect


def _is_local(address: Any) -> bool:
    if isinstance(address, str | bytes):  # a Unix socket
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _no_internet(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def guarded(self: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise AssertionError(f"test tried to reach {address!r}; only loopback is allowed")
        return _real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Scale the per-test timeout (pyproject's ``timeout``) by TETHER_TEST_TIMEOUT_SCALE
    on a slow machine; a test's own ``timeout`` mark is scaled too."""
    scale = float(os.environ.get("TETHER_TEST_TIMEOUT_SCALE", "1"))
    if scale == 1:
        return
    default = float(config.getini("timeout") or 0)
    for item in items:
        own = item.get_closest_marker("timeout")
        seconds = float(own.args[0]) if own is not None and own.args else default
        if seconds:
            item.add_marker(pytest.mark.timeout(seconds * scale), append=False)


@pytest.fixture
def database_url(tmp_path: Any) -> str:
    """A fresh store for one test: SQLite in tmp_path, or PostgreSQL when the run is on it
    (TETHER_TEST_DATABASE=postgresql, see database_support)."""
    return database_url_for(str(tmp_path), str(tmp_path / "tether.db"))


def pytest_sessionstart(session: pytest.Session) -> None:
    mark_this_run()
    if not on_postgresql():
        return
    problem = reachable()
    if problem and on_ci():
        pytest.exit(f"TETHER_TEST_DATABASE=postgresql on CI: {problem}", returncode=1)
    if problem:
        pytest.exit(f"no PostgreSQL run: {problem}", returncode=0)


def pytest_sessionfinish(session: pytest.Session) -> None:
    drop_created()
    left = kill_left_behind()
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = [f"{len(left)} process(es) the tests started outlived them; killed:", *left]
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_sep("=", "processes left behind", yellow=True)
            for line in lines:
                reporter.write_line(line)
