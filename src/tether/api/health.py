"""/api/healthz: liveness, open to anyone who can reach the server."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tether import __version__
from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute

router = APIRouter(tags=["health"], route_class=ValidTextRoute)


@router.get("/api/healthz")
async def healthz(services: ServicesDep) -> dict[str, Any]:
    """Liveness, with the shell sandbox's state (bwrap | unavailable | off) and how
    per-call limits are enforced (cgroup2 | cgroup1 | rlimit)."""
    return {"status": "ok", "version": __version__, **services.sandbox.status()}
