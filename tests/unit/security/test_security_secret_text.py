"""Secrets quoted by an error text are masked in every form it may quote them in."""

from __future__ import annotations

from tether.security.secret_text import MASK, masked_text, shown_url

KEY = "AIzaSyLEAKEDKEY0123456789"


def test_a_secret_is_masked_as_given_stripped_and_escaped() -> None:
    text = f"Illegal header value b'{KEY}\\n'; again: {KEY}"
    assert masked_text(text, [f"{KEY}\n"]) == f"Illegal header value b'{MASK}'; again: {MASK}"


def test_short_values_are_not_searched_for() -> None:
    """An env value such as "1" would mask every digit 1 of the message."""
    assert masked_text("exit 1 after 1 s", ["1", "true"]) == "exit 1 after 1 s"


def test_a_url_is_shown_by_its_host_wherever_it_or_its_path_is_quoted() -> None:
    url = "https://u:pw-0123456789@mcp.example:8443/s/tok-0123456789/mcp?key=q-0123456789"
    text = f"404 for url '{url}'; path /s/tok-0123456789/mcp?key=q-0123456789; pw-0123456789"
    masked = masked_text(text, urls=[url])
    assert masked == f"404 for url 'https://mcp.example:8443/…'; path /…; {MASK}"
    assert shown_url(shown_url(url)) == shown_url(url) == "https://mcp.example:8443/…"
