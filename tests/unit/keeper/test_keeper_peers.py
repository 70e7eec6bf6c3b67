"""Who may talk to a runner (the sandboxed case is in test_keeper_runner.py, with a real
bubblewrap)."""

from __future__ import annotations

import os
import socket

import pytest

from tether.keeper import peers


def test_a_process_of_the_runners_user_and_namespace_may() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert peers.refusal(a) is None


def test_another_user_may_not(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = socket.socketpair()
    with a, b:
        if os.geteuid() == 0:
            # The peer is root, whom a runner of any user takes: pretend to be another.
            monkeypatch.setattr(os, "geteuid", lambda: 12345)
            assert peers.refusal(a) is None
        else:
            monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
            assert "runs as uid" in (peers.refusal(a) or "")
