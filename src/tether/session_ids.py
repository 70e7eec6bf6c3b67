"""What a new session's id may hold.

A session id is a path segment of the API (``/api/chats/{id}``,
``/api/tool-calls/{id}/...``), and an encoded ``/`` (``%2F``) is decoded before routing:
a session whose id held one could be created but never read, stopped or cleaned up by
those routes. Control characters have no place in an id either (a NUL cannot even be
stored in PostgreSQL), nor have characters that are not seen as what they are: bidi
controls and zero-width characters disguise an id in the console and reorder the log
lines it is written into, and line separators break them. Nor may an id be blank. Ids
already stored are left as they are.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories refused in an id: controls (C0, DEL, C1), format characters (bidi
#: controls, zero-width characters), line and paragraph separators.
_UNSEEN = frozenset({"Cc", "Cf", "Zl", "Zp"})


def routable(session_id: str) -> str:
    """``session_id``, or ValueError saying what it may not hold."""
    if "/" in session_id:
        raise ValueError("a session id may not hold '/' (it is part of the API's paths)")
    if any(unicodedata.category(c) in _UNSEEN for c in session_id):
        raise ValueError(
            "a session id may not hold control characters, bidi controls, zero-width "
            "characters or line separators"
        )
    if not session_id.strip():
        raise ValueError("a session id may not be blank")
    if session_id in (".", ".."):
        raise ValueError("a session id may not be '.' or '..' (clients drop them from paths)")
    return session_id
