"""How request validation errors are reported: where and what, never the value sent.

FastAPI's default 422 body echoes each offending input back. That input can be a secret
(an API key that was too long, say), so only the location and the message are kept.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from tether.mcp.service import (
    McpClientExists,
    McpClientNotFound,
    McpError,
    McpInvalid,
    McpUnavailable,
)
from tether.store.database import UnstorableValue

_MCP_STATUS: dict[type[McpError], int] = {
    McpClientNotFound: 404,
    McpClientExists: 409,
    McpInvalid: 422,
    McpUnavailable: 502,
}


def _safe(error: dict[str, Any]) -> dict[str, Any]:
    return {
        "loc": list(error.get("loc", ())),
        "msg": error.get("msg", ""),
        "type": error.get("type", ""),
    }


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": [_safe(e) for e in exc.errors()]}, status_code=422)


async def _mcp_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, McpError)
    return JSONResponse({"detail": str(exc)}, status_code=_MCP_STATUS.get(type(exc), 400))


async def _unstorable(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=422)


def install(app: FastAPI) -> None:
    """Register the redacting 422 handler and the domain error mapping on ``app``."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(UnstorableValue, _unstorable)
    app.add_exception_handler(McpError, _mcp_error)
