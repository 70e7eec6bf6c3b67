"""Protocol numbers: a server and a runner speak the newest number both know, and a
peer outside the other's range is told so."""

from __future__ import annotations

import pytest

from tether.keeper import protocol


def test_peers_speak_the_newest_number_both_know(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protocol, "PROTOCOL", 3)
    monkeypatch.setattr(protocol, "OLDEST", 2)
    assert protocol.negotiate(1, 1) is None  # an older runner we no longer speak
    assert protocol.negotiate(1, 2) == 2  # an older one we still speak
    assert protocol.negotiate(2, 3) == 3
    assert protocol.negotiate(2, 5) == 3  # a newer runner that still speaks ours
    assert protocol.negotiate(4, 5) is None  # a newer one that dropped ours


def test_requests_outside_the_range_are_refused_but_hello(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(protocol, "PROTOCOL", 3)
    monkeypatch.setattr(protocol, "OLDEST", 2)
    assert protocol.check_request({"v": 2, "op": "list"}) == "list"
    with pytest.raises(protocol.ProtocolError, match="older than this runner's oldest"):
        protocol.check_request({"v": 1, "op": "list"})
    with pytest.raises(protocol.ProtocolError, match="newer than this runner's"):
        protocol.check_request({"v": 4, "op": "start"})
    for version in (protocol.HELLO_VERSION, 9):
        assert protocol.check_request({"v": version, "op": "hello"}) == "hello"
    with pytest.raises(protocol.ProtocolError, match="bad protocol version"):
        protocol.check_request({"v": True, "op": "hello"})
