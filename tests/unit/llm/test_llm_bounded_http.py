"""The HTTP client given to the model SDK asks only for encodings Tether can bound."""

from __future__ import annotations

import importlib

import pytest

from tether.llm.bounded_http import bounded_http_client


def test_providers_are_asked_only_for_encodings_whose_bodies_can_be_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As where brotli and zstandard are installed: the library then asks for br and zstd,
    # whose error bodies Tether does not read (it cannot inflate them to a bound).
    library = type(bounded_http_client()).__mro__[2]
    client_module = importlib.import_module(library.__module__.partition(".")[0] + "._client")
    monkeypatch.setattr(client_module, "ACCEPT_ENCODING", "gzip, deflate, br, zstd")
    assert bounded_http_client().headers["Accept-Encoding"] == "gzip, deflate"
