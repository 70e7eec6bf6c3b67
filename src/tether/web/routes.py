"""The console's pages: `/` (the app, or a hint to open the printed URL) and its static
files. The token URL logs the browser in with a cookie the perimeter accepts for /api."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from tether.security.perimeter import COOKIE_NAME, authenticated, header_map, token_matches

STATIC_DIR = Path(__file__).parent / "static"

# The page loads only its own files; nothing inline, so injected markup cannot run.
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'self'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

_LOGIN_HINT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tether: sign in</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/style.css"></head>
<body class="hint"><main class="hint-box"><h1>Tether</h1>
<p>Open the URL printed by <code>tether serve</code> (it ends in <code>?token=...</code>)
to use the console in this browser.</p></main></body></html>
"""


# Optional APIs other parts of Tether add; the page asks before calling them, so a server
# without them shows a note instead of failing requests.
_OPTIONAL_APIS = {"approvals": "/api/approval/list", "cron": "/api/cron/jobs"}


def _logged_in(token: str | None, request: Request) -> bool:
    if token is None:
        return True
    return authenticated(token, header_map(request.scope))


def console_router(token: str | None) -> APIRouter:
    """Routes for `/`; ``token`` None means the server runs without auth."""
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    async def index(request: Request) -> Response:
        offered = request.query_params.get("token")
        if offered is not None and token is not None:
            if not token_matches(token, offered):
                return HTMLResponse(_LOGIN_HINT, status_code=401, headers=_SECURITY_HEADERS)
            # A redirect to the bare URL keeps the token out of the address bar and history.
            response: Response = RedirectResponse("/", status_code=303, headers=_SECURITY_HEADERS)
            response.set_cookie(
                COOKIE_NAME, token, httponly=True, samesite="strict", path="/", secure=False
            )
            return response
        if not _logged_in(token, request):
            return HTMLResponse(_LOGIN_HINT, headers=_SECURITY_HEADERS)
        return FileResponse(STATIC_DIR / "index.html", headers=_SECURITY_HEADERS)

    @router.get("/api/console/features")
    async def features(request: Request) -> dict[str, bool]:
        """Which optional APIs this server has (the perimeter guards this like all /api)."""
        # The OpenAPI document lists every route, however the routers were included.
        paths = request.app.openapi().get("paths", {})
        return {name: path in paths for name, path in _OPTIONAL_APIS.items()}

    return router


def mount_console(app: FastAPI, token: str | None) -> None:
    """Add the console's page and static files to ``app``."""
    app.include_router(console_router(token))
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
