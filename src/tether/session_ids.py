"""What a new session's id may hold.

A session id is a path segment of the API (``/api/chats/{id}``,
``/api/tool-calls/{id}/...``), and an encoded ``/`` (``%2F``) is decoded before routing:
a session whose id held one could be created but never read, stopped or cleaned up by
those routes. Control characters have no place in an id either (a NUL cannot even be
stored in PostgreSQL). Ids already stored are left as they are.
"""

from __future__ import annotations


def routable(session_id: str) -> str:
    """``session_id``, or ValueError saying what it may not hold."""
    if "/" in session_id:
        raise ValueError("a session id may not hold '/' (it is part of the API's paths)")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in session_id):
        raise ValueError("a session id may not hold control characters")
    if session_id in (".", ".."):
        raise ValueError("a session id may not be '.' or '..' (clients drop them from paths)")
    return session_id
