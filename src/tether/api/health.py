"""/api/healthz: liveness, open to anyone who can reach the server."""

from __future__ import annotations

from fastapi import APIRouter

from tether import __version__

router = APIRouter(tags=["health"])


@router.get("/api/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}
