"""/api/models: providers, their keys (write-only) and the active model."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field, HttpUrl

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.llm.provider_service import ProviderView, UnknownModel, UnknownProvider

router = APIRouter(prefix="/api/models", tags=["models"], route_class=ValidTextRoute)

_ID = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


class ModelRef(BaseModel):
    id: str = Field(min_length=1, max_length=200)
    name: str = Field("", max_length=200)


class ProviderOut(BaseModel):
    id: str
    name: str
    base_url: str
    has_api_key: bool
    chat_model: str | None
    models: list[ModelRef]
    is_custom: bool


class CustomProviderIn(BaseModel):
    id: str = Field(pattern=_ID)
    name: str = Field(min_length=1, max_length=200)
    default_base_url: HttpUrl
    chat_model: str | None = Field(None, max_length=200)
    models: list[ModelRef] = Field(default_factory=list)


class ProviderConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api_key: str | None = Field(None, max_length=4096)
    base_url: HttpUrl | None = None


class ActiveModelIn(BaseModel):
    provider_id: str = Field(min_length=1)
    model: str = Field(min_length=1)
    scope: str = "global"


def _out(view: ProviderView) -> ProviderOut:
    return ProviderOut(
        id=view.id,
        name=view.name,
        base_url=view.base_url,
        has_api_key=view.has_api_key,
        chat_model=view.chat_model,
        models=[ModelRef(id=m["id"], name=m.get("name", "")) for m in view.models],
        is_custom=view.is_custom,
    )


@router.get("")
async def list_providers(services: ServicesDep) -> dict[str, Any]:
    """Providers and their models; keys are never returned, only whether one is set."""
    providers = [_out(v) for v in await services.providers.all()]
    return {"providers": providers, "active": await services.providers.get_active()}


@router.post("/custom-providers", status_code=201, response_model=ProviderOut)
async def add_provider(body: CustomProviderIn, services: ServicesDep) -> ProviderOut:
    models = [{"id": m.id, "name": m.name or m.id} for m in body.models]
    if body.chat_model and body.chat_model not in {m["id"] for m in models}:
        models.append({"id": body.chat_model, "name": body.chat_model})
    view = await services.providers.add(
        body.id, body.name, str(body.default_base_url).rstrip("/"), body.chat_model, models
    )
    if view is None:
        raise HTTPException(409, f"A provider with id {body.id!r} already exists")
    return _out(view)


@router.put("/{provider_id}/config", response_model=ProviderOut)
async def configure_provider(
    provider_id: str, body: ProviderConfigIn, services: ServicesDep
) -> ProviderOut:
    base_url = str(body.base_url).rstrip("/") if body.base_url else None
    try:
        return _out(await services.providers.configure(provider_id, body.api_key, base_url))
    except UnknownProvider:
        raise HTTPException(404, f"Provider {provider_id!r} not found") from None


@router.delete("/custom-providers/{provider_id}")
async def delete_provider(provider_id: str, services: ServicesDep) -> dict[str, Any]:
    if not await services.providers.delete(provider_id):
        raise HTTPException(404, f"Provider {provider_id!r} not found")
    return {"deleted": provider_id}


class ConnectionTestOut(BaseModel):
    ok: bool
    model: str
    latency_ms: int
    error: str | None


@router.post("/{provider_id}/test", response_model=ConnectionTestOut)
async def test_provider(provider_id: str, services: ServicesDep) -> ConnectionTestOut:
    """Make a 1-token completion through the provider; ``ok`` or the error it gave."""
    timeout = min(services.settings.llm_timeout_seconds, 30.0)
    try:
        result = await services.providers.test_connection(provider_id, timeout)
    except UnknownProvider:
        raise HTTPException(404, f"Provider {provider_id!r} not found") from None
    return ConnectionTestOut(**result.__dict__)


@router.put("/active")
async def set_active(body: ActiveModelIn, services: ServicesDep) -> dict[str, Any]:
    try:
        return await services.providers.set_active(body.provider_id, body.model, body.scope)
    except UnknownProvider:
        raise HTTPException(404, f"Provider {body.provider_id!r} not found") from None
    except UnknownModel as exc:
        raise HTTPException(422, str(exc)) from None


@router.get("/active")
async def get_active(services: ServicesDep) -> dict[str, Any]:
    return {"active": await services.providers.get_active()}
