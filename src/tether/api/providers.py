"""/api/models: providers, their keys (write-only) and the active model.

Shapes follow QwenPaw's ``ProviderInfo`` and ``ActiveModelsInfo``. Tether speaks one
protocol, OpenAI chat completions, so ``chat_model`` (QwenPaw's protocol class) has one
accepted value; a key is shown masked, as QwenPaw does, plus ``has_api_key``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, HttpUrl

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.llm.provider_service import ProviderView

router = APIRouter(prefix="/api/models", tags=["models"], route_class=ValidTextRoute)

_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
#: QwenPaw names the wire protocol by its model class; Tether has only this one.
MASKED_KEY = "******"

ChatProtocol = Literal["OpenAIChatModel"]
CHAT_PROTOCOL: ChatProtocol = "OpenAIChatModel"


class ModelInfo(BaseModel):
    id: str = Field(min_length=1, max_length=200)
    name: str = Field("", max_length=200)


class ProviderInfo(BaseModel):
    id: str
    name: str
    base_url: str
    api_key: str = Field(description="Masked when set, never the key itself.")
    chat_model: ChatProtocol
    models: list[ModelInfo] = Field(description="A built-in provider's models.")
    extra_models: list[ModelInfo] = Field(description="Models the user added.")
    is_custom: bool
    enabled: bool = True
    require_api_key: bool = False
    has_api_key: bool = Field(description="Tether: whether a key is set.")


def _no_credentials(url: HttpUrl | None) -> HttpUrl | None:
    # They would be stored and listed in plain text, where api_key is sealed and masked.
    if url is not None and (url.username or url.password):
        raise ValueError("must not carry a user name or password (user:pass@): use api_key")
    return url


BaseUrl = Annotated[HttpUrl, AfterValidator(_no_credentials)]


class CreateCustomProvider(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=_ID)
    name: str = Field(min_length=1, max_length=200)
    default_base_url: BaseUrl
    api_key: str = Field("", max_length=4096)
    api_key_prefix: str = Field("", max_length=64)
    chat_model: ChatProtocol = CHAT_PROTOCOL
    models: list[ModelInfo] = Field(default_factory=list, max_length=500)


def _nothing_asked(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value:
        raise ValueError("Tether does not support this; leave it out or send {}")
    return value


#: QwenPaw's fields Tether has no meaning for: empty (as QwenPaw's console sends them
#: with every save) they ask nothing; any value is refused rather than silently ignored.
NothingAsked = Annotated[dict[str, Any] | None, AfterValidator(_nothing_asked)]


class ProviderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api_key: str | None = Field(None, max_length=4096)
    base_url: BaseUrl | None = None
    name: str | None = Field(None, min_length=1, max_length=200)
    chat_model: ChatProtocol | None = None
    enabled: Literal[True] | None = Field(None, description="A provider cannot be disabled.")
    auto_discover: bool = True
    generate_kwargs: NothingAsked = None
    custom_headers: NothingAsked = None
    auth_mode: None = Field(None, description="Tether sends the key as a bearer token.")


class ModelSlot(BaseModel):
    provider_id: str = ""
    model: str = ""


class ModelSlotRequest(BaseModel):
    provider_id: str = Field(min_length=1)
    model: str = Field(min_length=1)
    scope: Literal["global", "agent"]
    agent_id: str | None = None


class ActiveModelsInfo(BaseModel):
    active_llm: ModelSlot | None
    effective_max_input_length: int | None = None


class ConnectionTestOut(BaseModel):
    success: bool
    message: str
    ok: bool = Field(description="Tether: same as success.")
    model: str
    latency_ms: int
    error: str | None


def _info(view: ProviderView) -> ProviderInfo:
    models = [ModelInfo(id=m["id"], name=m.get("name") or m["id"]) for m in view.models]
    if view.chat_model and view.chat_model not in {m.id for m in models}:
        models.append(ModelInfo(id=view.chat_model, name=view.chat_model))
    return ProviderInfo(
        id=view.id,
        name=view.name,
        base_url=view.base_url,
        api_key=MASKED_KEY if view.has_api_key else "",
        chat_model=CHAT_PROTOCOL,
        models=[] if view.is_custom else models,
        extra_models=models if view.is_custom else [],
        is_custom=view.is_custom,
        has_api_key=view.has_api_key,
    )


def _agent_scope_needs_id(scope: str, agent_id: str | None) -> None:
    # Tether has one agent, so an agent's model is the global one; QwenPaw still
    # requires naming the agent.
    if scope == "agent" and not agent_id:
        raise HTTPException(400, "agent_id is required when scope is 'agent'")


async def _active(services: ServicesDep) -> ActiveModelsInfo:
    active = await services.providers.get_active()
    slot = ModelSlot(provider_id=active["provider_id"], model=active["model"]) if active else None
    return ActiveModelsInfo(active_llm=slot)


@router.get("", response_model=list[ProviderInfo])
async def list_providers(services: ServicesDep) -> list[ProviderInfo]:
    """Providers and their models; a key is shown masked, never in the clear."""
    return [_info(v) for v in await services.providers.all()]


@router.post("/custom-providers", status_code=201, response_model=ProviderInfo)
async def add_provider(body: CreateCustomProvider, services: ServicesDep) -> ProviderInfo:
    """Add an OpenAI-compatible provider (409 if the id is taken)."""
    models = [{"id": m.id, "name": m.name or m.id} for m in body.models]
    base_url = str(body.default_base_url).rstrip("/")
    view = await services.providers.add(body.id, body.name, base_url, None, models)
    if body.api_key:
        view = await services.providers.configure(body.id, body.api_key, None)
    return _info(view)


@router.put("/{provider_id}/config", response_model=ProviderInfo)
async def configure_provider(
    provider_id: str, body: ProviderConfig, services: ServicesDep
) -> ProviderInfo:
    """Set the key (empty string: remove it), the base URL, or a custom provider's name."""
    base_url = str(body.base_url).rstrip("/") if body.base_url else None
    view = await services.providers.configure(provider_id, body.api_key, base_url, body.name)
    return _info(view)


@router.delete("/custom-providers/{provider_id}", response_model=list[ProviderInfo])
async def delete_provider(provider_id: str, services: ServicesDep) -> list[ProviderInfo]:
    """Remove a provider; answers the providers that remain, as QwenPaw does."""
    await services.providers.delete(provider_id)
    return [_info(v) for v in await services.providers.all()]


@router.post("/{provider_id}/test", response_model=ConnectionTestOut)
async def test_provider(provider_id: str, services: ServicesDep) -> ConnectionTestOut:
    """Make a 1-token completion through the provider; ``success`` or the error it gave."""
    timeout = min(services.settings.llm_timeout_seconds, 30.0)
    result = await services.providers.test_connection(provider_id, timeout)
    message = "Connection successful" if result.ok else f"Connection failed: {result.error}"
    return ConnectionTestOut(success=result.ok, message=message, **result.__dict__)


@router.put("/active", response_model=ActiveModelsInfo)
async def set_active(body: ModelSlotRequest, services: ServicesDep) -> ActiveModelsInfo:
    """Choose the model turns use (422 if the provider does not offer it)."""
    _agent_scope_needs_id(body.scope, body.agent_id)
    await services.providers.set_active(body.provider_id, body.model, "global")
    return await _active(services)


@router.get("/active", response_model=ActiveModelsInfo)
async def get_active(
    services: ServicesDep,
    scope: Annotated[Literal["effective", "global", "agent"], Query()] = "effective",
    agent_id: Annotated[str | None, Query(max_length=200)] = None,
) -> ActiveModelsInfo:
    """The active model (every scope answers the one global model)."""
    _agent_scope_needs_id(scope, agent_id)
    return await _active(services)
