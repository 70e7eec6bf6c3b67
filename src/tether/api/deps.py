"""Dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from tether.services import Services


# Async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, a thread
# hop on every request that cost most of a simple GET's time under load.
async def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(_services)]
