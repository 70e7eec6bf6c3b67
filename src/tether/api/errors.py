"""How errors become HTTP answers, in one place.

Request validation errors keep where and what, never the value sent: FastAPI's default
422 body echoes each offending input back, and that input can be a secret (an API key
that was too long, say). Tether's own errors map by kind (see ``tether.errors``), so no
route translates exceptions itself.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from tether.errors import (
    Busy,
    Conflict,
    Forbidden,
    Invalid,
    NotAnswering,
    NotFound,
    OutOfStorage,
    TetherError,
    Unavailable,
)

_STATUS: tuple[tuple[type[TetherError], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (Forbidden, 403),
    (Busy, 429),
    (Invalid, 422),
    (Unavailable, 502),
    (NotAnswering, 503),
    (OutOfStorage, 507),
)


def _safe(error: dict[str, Any]) -> dict[str, Any]:
    return {
        "loc": list(error.get("loc", ())),
        "msg": error.get("msg", ""),
        "type": error.get("type", ""),
    }


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": [_safe(e) for e in exc.errors()]}, status_code=422)


def status_of(exc: TetherError) -> int:
    """The HTTP status for an error's kind."""
    return next(status for kind, status in _STATUS if isinstance(exc, kind))


async def _tether_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TetherError)
    detail: Any = str(exc)
    if isinstance(exc, Invalid) and exc.errors is not None:
        detail = [_safe(e) for e in exc.errors]
    return JSONResponse({"detail": detail}, status_code=status_of(exc))


def install(app: FastAPI) -> None:
    """Register the error handlers on ``app``."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    # Only the kinds: an error of no kind is a fault, answered as any other 500 (its
    # message is for the log, not for the client).
    for kind, _status in _STATUS:
        app.add_exception_handler(kind, _tether_error)
