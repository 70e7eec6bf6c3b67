"""Secrets a configuration holds, kept out of what Tether shows and logs about it.

A URL is often a credential (incoming webhooks and hosted MCP servers carry a token in
the path or the query), so it is shown by scheme, host and port only. Error texts from
libraries quote what they were given (a header value that HTTP refused, the URL that
failed, a child's stderr printing its environment): before such a text is kept, shown
or logged, the secrets it may quote are masked.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

#: What a secret value is shown as.
MASK = "********"
# Values shorter than this are not searched for: env values such as "1" or "true" would
# mask every such word of a message, and a credential is longer.
_SHORTEST_SECRET = 8


def shown_url(url: str) -> str:
    """``url`` as it is shown: scheme, host and port, with ``/…`` in place of anything
    after them (``https://hooks.slack.com/…``), and without a ``user:pass@``. Showing
    it again changes nothing."""
    parts = urlsplit(url)
    rest = url[len(f"{parts.scheme}://{parts.netloc}") :]
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}" + ("/…" if rest not in ("", "/") else "/")


def is_shown_url(url: str) -> bool:
    """Whether ``url`` is the shown form of a longer URL (it ends with ``/…``): sent back,
    it stands for the stored URL, never for itself."""
    return url.endswith("/…") and shown_url(url) == url


def masked_text(text: str, secrets: Iterable[str] = (), urls: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` replaced by ``MASK`` (as given, without its
    surrounding whitespace, and as a ``repr`` would escape it: an error may quote any of
    those), and each of ``urls`` by its shown form (so is what follows its host, when
    quoted apart)."""
    for url in urls:
        if not url:
            continue
        text = text.replace(url, shown_url(url))
        parts = urlsplit(url)
        rest = url[len(f"{parts.scheme}://{parts.netloc}") :]
        if len(rest) >= _SHORTEST_SECRET:
            text = text.replace(rest, "/…")
        if parts.password:
            text = text.replace(parts.password, MASK)
    forms = {
        form
        for secret in secrets
        for form in (secret, secret.strip(), repr(secret)[1:-1], repr(secret.strip())[1:-1])
        if len(form) >= _SHORTEST_SECRET
    }
    for form in sorted(forms, key=len, reverse=True):  # a longer form before its part
        text = text.replace(form, MASK)
    return text
