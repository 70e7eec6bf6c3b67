"""The runner's protocol: one JSON object per line over a unix socket.

A request is ``{"v": <protocol>, "op": <name>, ...}``; the answer ``{"ok": true, ...}``
or ``{"ok": false, "error": <text>}``. ``watch`` turns the connection into a stream of
events (``{"event": "output" | "ended", "call_id": ..., ...}``).

Versioning: every peer speaks a range of protocol numbers, ``OLDEST`` to ``PROTOCOL``.
``hello`` is always sent at ``v`` 1 and its answer's fields only ever grow, so any server
can ask any runner who it is: its ``protocol`` (newest) and ``oldest`` (absent: the
same as ``protocol``, as in the runners of protocol 1), its Tether ``version``, how
many ``calls`` it runs and, in runners that have them, whether it is ``retiring`` (it
takes no new call) and its ``idle_exit`` (seconds with no call and no connection before
it exits; null: never). The server then speaks the newest number both know
(:func:`negotiate`) on every later request; the runner answers a request whose ``v`` is
in its range and refuses others naming its own. Additions that old peers may ignore
(new optional fields) do not change the number; changed meanings do, and a peer that
drops an old meaning raises its ``OLDEST``. What a server does with a runner of another
version (use it, replace it once idle, or refuse) is :mod:`tether.keeper.startup`'s.

Protocol 2: ``start`` takes ``limits`` (the call's memory, process and CPU limits: the
runner puts its tree in a limits group of its own and records what it used in the
status file's ``resources``) and ``supervised`` (the root is the sandbox's bwrap, spared
by a graceful stop). A request needs at least the protocol that gave its fields their
meaning (:func:`version_for`): a server speaking protocol 1 with an older runner refuses
such a start itself rather than have the call run without its limits.

Protocol 3: ``start`` takes ``syscall_filter`` (base64 of the seccomp program a
sandboxed call runs under): the runner hands it to bwrap on a descriptor of its own and
writes that descriptor's number where the argv holds ``syscall_filter.FD_SLOT``. To an
older runner the server hands the filter through an exec step in the argv instead
(:mod:`tether.keeper.launcher`).
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL = 3
# The oldest protocol this code still speaks, as a runner and as a server.
OLDEST = 1
# What ``hello`` is sent at, always (see the module doc).
HELLO_VERSION = 1
# Requests carry environments; keep a generous but finite line length.
MAX_LINE = 16 * 1024 * 1024

OPS = ("hello", "start", "signal", "extend", "list", "watch", "retire")


# Fields of a request, and the protocol that gave them their meaning.
_FIELDS_SINCE = {"limits": 2, "supervised": 2, "syscall_filter": 3}


def since(field: str) -> int:
    """The protocol that gave a request's ``field`` its meaning."""
    return _FIELDS_SINCE[field]


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
    op = message.get("op")
    if op == "hello":
        return "hello"  # answered at any version: how peers learn each other's range
    if version > PROTOCOL:
        raise ProtocolError(f"protocol {version} is newer than this runner's ({PROTOCOL})")
    if version < OLDEST:
        raise ProtocolError(f"protocol {version} is older than this runner's oldest ({OLDEST})")
    if op not in OPS:
        raise ProtocolError(f"unknown operation {op!r}")
    return str(op)


def negotiate(their_oldest: int, their_newest: int) -> int | None:
    """The protocol to speak with a peer serving ``their_oldest`` to ``their_newest``:
    the newest both know, or None when the ranges do not meet."""
    spoken = min(PROTOCOL, their_newest)
    return spoken if spoken >= max(OLDEST, their_oldest) else None
