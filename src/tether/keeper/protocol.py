"""The runner's protocol: one JSON object per line over a unix socket.

A request is ``{"v": <protocol>, "op": <name>, ...}``; the answer ``{"ok": true, ...}``
or ``{"ok": false, "error": <text>}``. ``watch`` turns the connection into a stream of
events (``{"event": "output" | "ended", "call_id": ..., ...}``).

Versioning: ``hello`` tells the runner's protocol number. The runner answers any
request whose ``v`` is at most its own, so a newer server can keep talking to an older
runner with the operations both know, and ask it to ``retire`` (exit once it has no
call left) so that a newer runner can replace it. Additions that old peers may ignore
(new optional fields) do not change the number; changed meanings do. A request carries
the lowest number that has what it asks for (:func:`version_for`), so an older runner
answers what it knows and refuses, rather than ignores, what it cannot do.

Protocol 2: ``start`` takes ``limits`` (the call's memory, process and CPU limits: the
runner puts its tree in a limits group of its own and records what it used in the
status file's ``resources``) and ``supervised`` (the root is the sandbox's bwrap, spared
by a graceful stop). A runner of protocol 1 would run such a call without its limits.
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL = 2
# Requests carry environments; keep a generous but finite line length.
MAX_LINE = 16 * 1024 * 1024

OPS = ("hello", "start", "signal", "extend", "list", "watch", "retire")


# Fields of a request, and the protocol that gave them their meaning.
_FIELDS_SINCE = {"limits": 2, "supervised": 2}


def version_for(fields: dict[str, Any]) -> int:
    """The lowest protocol that understands every field of a request."""
    return max([1, *(v for name, v in _FIELDS_SINCE.items() if name in fields)])


class ProtocolError(Exception):
    """A request or answer that does not follow the protocol, or a refused request."""


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One line as a message (raises ProtocolError if it is not a JSON object)."""
    try:
        message = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise ProtocolError("not a JSON object")
    return message


def check_request(message: dict[str, Any]) -> str:
    """The operation a request asks for, once its version and name are acceptable."""
    version = message.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ProtocolError(f"bad protocol version {version!r}")
    if version > PROTOCOL:
        raise ProtocolError(f"protocol {version} is newer than this runner's ({PROTOCOL})")
    op = message.get("op")
    if op not in OPS:
        raise ProtocolError(f"unknown operation {op!r}")
    return str(op)
