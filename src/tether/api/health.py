"""/api/healthz: liveness, open to anyone who can reach the server."""

from __future__ import annotations

from fastapi import APIRouter

from tether import __version__
from tether.api.valid_json import ValidTextRoute

router = APIRouter(tags=["health"], route_class=ValidTextRoute)


@router.get("/api/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}
