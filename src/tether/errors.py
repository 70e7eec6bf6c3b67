"""The errors every layer raises, and the few kinds the HTTP layer tells apart.

A domain error subclasses one kind; its message is what a person reads (the API's
``detail``), so it names the thing and says what is wrong. ``api/errors.py`` maps each
kind to a status once, so no route translates exceptions itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class TetherError(Exception):
    """Base of every error Tether raises on purpose."""


class NotFound(TetherError, LookupError):
    """The thing asked for does not exist (HTTP 404)."""


class Conflict(TetherError):
    """It exists, but its state does not allow the request (HTTP 409)."""


class Forbidden(TetherError):
    """It exists, but belongs to someone else (HTTP 403)."""


class Busy(TetherError):
    """The server is at a limit; the same request may succeed later (HTTP 429)."""


class Unavailable(TetherError):
    """Something Tether depends on could not be asked (HTTP 502)."""


class NotAnswering(TetherError):
    """Another node that must carry the request out did not answer in time (HTTP 503)."""


class OutOfStorage(TetherError):
    """The server's storage refuses the write: its disk is full, or its database is
    read-only (HTTP 507). Nothing of the request was kept; it may succeed once the
    operator has made room."""


class Invalid(TetherError, ValueError):
    """The input is wrong in a way the request schema alone cannot see (HTTP 422).

    ``errors``, when given, locates each problem as request validation does (``loc``,
    ``msg``, ``type``), and ``field`` gives one such location for the message; with
    neither, the message alone is the detail.
    """

    def __init__(
        self, message: str, field: str | None = None, errors: Sequence[dict[str, Any]] = ()
    ) -> None:
        super().__init__(message)
        self.errors: list[dict[str, Any]] | None = [dict(e) for e in errors] or None
        if field is not None and self.errors is None:
            self.errors = [{"loc": ("body", field), "msg": message, "type": "value_error"}]


#: Every kind by a name of its own, as errors cross from one node to another.
KINDS: dict[str, type[TetherError]] = {
    "not_found": NotFound,
    "conflict": Conflict,
    "forbidden": Forbidden,
    "busy": Busy,
    "invalid": Invalid,
    "unavailable": Unavailable,
    "not_answering": NotAnswering,
    "out_of_storage": OutOfStorage,
}
