"""Who may talk to a runner: a process of the runner's own user (or root) in the
runner's own pid namespace.

The socket's mode keeps other users out, but not the runner's own calls: they run as
the same user, and one that can reach the socket (a home other than the one its sandbox
hides, a socket kept in a temporary directory the sandbox shows) could otherwise ask
the runner to start any command outside the sandbox. Every sandboxed call lives in a
pid namespace of its own (bwrap's ``--unshare-pid``), so a peer in another one is
refused, whatever it can see.

The peer's namespace is read through a pidfd of the peer itself (``SO_PEERPIDFD``, Linux
6.5 and later), never through its number alone: a sandboxed peer that connected and
exited could otherwise lend its number to a process of the runner's namespace, read in
its place. Older kernels fall back to the number (that race stays open there).
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
    depth = _peer_depth(conn, pid)
    if depth is None:
        return "the peer has exited"
    if depth != _namespace_depth(os.getpid()):
        return "the peer runs in another pid namespace (a sandboxed call)"
    return None


# Not in Python 3.11's socket module; the kernel's number since Linux 6.5.
_SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)


def _peer_depth(conn: socket.socket, pid: int) -> int | None:
    """The peer's pid-namespace depth (see :func:`_namespace_depth`), read from a pidfd
    of the very process that connected (its fdinfo says ``Pid: -1`` once it has
    exited), else from its number on a kernel without ``SO_PEERPIDFD``."""
    try:
        pidfd = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
    except OSError:
        return _namespace_depth(pid)
    try:
        return _nspid_depth(Path(f"/proc/self/fdinfo/{pidfd}").read_bytes())
    except OSError:
        return None
    finally:
        os.close(pidfd)


def _namespace_depth(pid: int) -> int | None:
    """How many pid namespaces ``pid`` has a number in, from this /proc's down (its
    ``NSpid``: one per level, so a process of a nested namespace has more), or None
    if it is gone. Anyone may read it (a root peer's ``ns/pid`` link is not readable by
    a runner of another user)."""
    try:
        status = Path(f"/proc/{pid}/status").read_bytes()
    except OSError:
        return None  # gone, or pid 0: a namespace this runner cannot see into
    return _nspid_depth(status)


def _nspid_depth(text: bytes) -> int | None:
    """The number of levels in the ``NSpid:`` line of a status or pidfd fdinfo text;
    None if there is none, or its pid is 0 or -1 (not in this namespace's view, or
    exited)."""
    for line in text.splitlines():
        if line.startswith(b"NSpid:"):
            numbers = line.split()[1:]
            if not numbers or int(numbers[0]) <= 0:
                return None
            return len(numbers)
    return None
