"""A webhook's URL: what is accepted (it is shown as ``secret_text.shown_url``).

A URL is often the receiver's only credential (Slack's, Discord's and Teams' incoming
webhooks carry their token in the path), so it is kept like a secret: sealed in the
store, and shown by its scheme and host only (a token carried in the host name itself,
as some services do, is still shown).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from tether.errors import Invalid


class InvalidWebhook(Invalid):
    """The subscription cannot be accepted; the message says why."""


def check_url(url: str) -> str:
    """The URL if it is an absolute http(s) URL with a host that the delivering client
    can use too (a host with a zero-width space passed urlsplit and failed every
    attempt), without credentials; InvalidWebhook otherwise."""
    try:
        if any(c.isspace() or not c.isprintable() for c in url):
            raise ValueError("a space or control character")
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        raise InvalidWebhook("url is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise InvalidWebhook("url must be an absolute http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        # They would be kept and listed in plain text; deliveries are signed instead.
        raise InvalidWebhook("url must not carry a user name or password (user:pass@)")
    return url
