"""Messages between nodes, signed with a key every node derives from TETHER_SECRET_KEY.

Redis is shared infrastructure: whoever can write to it must not be able to have a node
cancel a call or approve a request. Each request and answer travels as its JSON text
with an HMAC-SHA256 of it; a message whose signature does not match is dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any


def request_key(secret_key: str) -> bytes:
    """The signing key for node requests (not the sealing key itself)."""
    return hmac.new(secret_key.encode(), b"tether node requests", hashlib.sha256).digest()


def sign(key: bytes, message: dict[str, Any]) -> str:
    body = json.dumps(message, separators=(",", ":"))
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"body": body, "mac": mac})


def opened(key: bytes, text: str) -> dict[str, Any] | None:
    """The message, if ``text`` is one signed with ``key``; None otherwise."""
    try:
        envelope = json.loads(text)
        body, mac = envelope["body"], envelope["mac"]
        expected = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
        if not isinstance(mac, str) or not hmac.compare_digest(mac, expected):
            return None
        message = json.loads(body)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return message if isinstance(message, dict) else None
