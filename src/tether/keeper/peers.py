"""Who may talk to a runner: a process of the runner's own user (or root) in the
runner's own pid namespace.

The socket's mode keeps other users out, but not the runner's own calls: they run as
the same user, and one that can reach the socket (a home other than the one its sandbox
hides, a socket kept in a temporary directory the sandbox shows) could otherwise ask
the runner to start any command outside the sandbox. Every sandboxed call lives in a
pid namespace of its own (bwrap's ``--unshare-pid``), so a peer in another one is
refused, whatever it can see.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

_UCRED = struct.Struct("3i")  # pid, uid, gid


def refusal(conn: socket.socket) -> str | None:
    """Why the peer of ``conn`` may not send requests, or None if it may."""
    try:
        pid, uid, _ = _UCRED.unpack(
            conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        )
    except OSError as exc:
        return f"the peer could not be identified: {exc}"
    if uid not in (os.geteuid(), 0):
        return f"the peer runs as uid {uid}, not the runner's"
    if _namespace_depth(pid) != _namespace_depth(os.getpid()):
        return "the peer runs in another pid namespace (a sandboxed call)"
    return None


def _namespace_depth(pid: int) -> int | None:
    """How many pid namespaces ``pid`` has a number in, from this /proc's down (its
    ``NSpid``: one per level, so a process of a nested namespace has more), or None
    if it is gone. Anyone may read it (a root peer's ``ns/pid`` link is not readable by
    a runner of another user)."""
    try:
        status = Path(f"/proc/{pid}/status").read_bytes()
    except OSError:
        return None  # gone, or pid 0: a namespace this runner cannot see into
    for line in status.splitlines():
        if line.startswith(b"NSpid:"):
            return len(line.split()) - 1
    return None
