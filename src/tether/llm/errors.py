"""A provider's error, said in its own words whatever shape its body has (pure)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from typing import Any

from tether.logs import redact
from tether.security.secret_text import masked_text, shown_url

_LIMIT = 500  # a provider may send a whole HTML page; a sentence is enough


def describe_error(body: Any) -> str:
    """The provider's message in an error body: an object, a list of them, or a string;
    anything shaped like a credential masked (some providers quote the key they were
    given, and the message is stored, shown and sent to webhooks with the task)."""
    found = _message_in(body, depth=0)
    text = redact(" ".join((found or "").split()))
    return text[:_LIMIT] + ("…" if len(text) > _LIMIT else "")


def _message_in(body: Any, depth: int) -> str | None:
    if depth > 4:  # bodies nest a little (Gemini: [{"error": {...}}]), never deeply
        return None
    if isinstance(body, str):
        return body or None
    if isinstance(body, list):
        items = [_message_in(item, depth + 1) for item in body]
    elif isinstance(body, dict):
        keys = ("message", "error", "detail", "msg", "errors")
        items = [_message_in(body.get(key), depth + 1) for key in keys]
    else:
        items = []
    return next((m for m in items if m), None)


def provider_message(exc: Any, secrets: Iterable[str] = ()) -> str:
    """The readable part of an SDK error (the provider's own message when it sent one),
    ``secrets`` (the key the request was sent with) masked wherever it is quoted."""
    described = describe_error(getattr(exc, "body", None))
    if not described:
        described = describe_error(_response_text(exc)) or "no details given"
    return masked_text(described, secrets)


def unreachable(base_url: str, exc: BaseException) -> str:
    """A provider that could not be reached, said with where (scheme, host and port: the
    rest of a base URL may carry a key) and why: the system's words when a system error
    lies beneath the SDK's, else those of the error beneath it ("Connection error."
    alone left an operator guessing which address failed, and a server out of
    descriptors blaming the provider)."""
    why = _system_reason(exc)
    if why is None:
        cause = exc.__cause__ or exc
        why = " ".join(str(cause).split()).rstrip(".") or type(cause).__name__
        why = redact(masked_text(why, urls=[base_url]))[:_LIMIT]
    return f"the model provider at {shown_url(base_url)} could not be reached ({why})"


# Errors of this machine, not of the network or the provider: said as such.
_LOCAL_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def _system_reason(exc: BaseException) -> str | None:
    """The system's words for the first system error in ``exc``'s chain (the SDK's
    errors wrap the HTTP library's, which wrap the socket's), marked when it is this
    server's own; None if there is none."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno:
            local = " on this server" if cause.errno in _LOCAL_ERRNOS else ""
            return f"{os.strerror(cause.errno)}{local}"
        cause = cause.__cause__ or cause.__context__
    return None


def _response_text(exc: Any) -> str:
    response = getattr(exc, "response", None)
    try:
        text = response.text if response is not None else ""
    except Exception:  # a streamed body not read yet: there is nothing more to say
        return ""
    return text if isinstance(text, str) else ""
