"""Guards for every test: nothing reaches a real model or the internet."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

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
