"""/api/webhooks: subscriptions to Tether's events, and their delivery log."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.security.secret_text import shown_url
from tether.store.records import WebhookAttemptRecord, WebhookDeliveryRecord, WebhookRecord
from tether.webhooks.address import InvalidWebhook, check_url
from tether.webhooks.events import EventType

router = APIRouter(prefix="/api/webhooks", tags=["webhooks"], route_class=ValidTextRoute)


_URL = Field(min_length=1, max_length=2000, description="An http:// or https:// URL.")
_EVENTS = Field(min_length=1, max_length=16)
_DESCRIPTION = Field(max_length=500)


def _http_url(value: str | None) -> str | None:
    try:
        return None if value is None else check_url(value)
    except InvalidWebhook as exc:
        raise ValueError(str(exc)) from None


class WebhookIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: Annotated[str, _URL]
    events: Annotated[list[EventType], _EVENTS]
    description: Annotated[str, _DESCRIPTION] = ""

    http_url = field_validator("url")(_http_url)


class WebhookChange(BaseModel):
    """What to change of a webhook: the fields given (at least one)."""

    model_config = ConfigDict(extra="forbid")
    url: Annotated[str | None, _URL] = None
    events: Annotated[list[EventType] | None, _EVENTS] = None
    description: Annotated[str | None, _DESCRIPTION] = None

    http_url = field_validator("url")(_http_url)

    @model_validator(mode="after")
    def _something(self) -> WebhookChange:
        if not self.model_fields_set:
            raise ValueError("give at least one of url, events, description")
        if any(getattr(self, name) is None for name in self.model_fields_set):
            raise ValueError("url, events and description may not be null")
        return self


class WebhookOut(BaseModel):
    id: str
    url: str = Field(
        description="Scheme, host and port only (https://hooks.example.com/…): a URL is "
        "often its receiver's credential, so it is stored sealed and never returned."
    )
    events: list[str]
    description: str
    created_at: float


class WebhookCreated(WebhookOut):
    secret: str = Field(
        description="The signing secret (Standard Webhooks, whsec_...). Shown only now."
    )


class WebhookList(BaseModel):
    items: list[WebhookOut]
    count: int


class AttemptOut(BaseModel):
    attempt: int
    started_at: float
    duration_seconds: float
    status_code: int | None
    error: str | None = Field(description="null when the receiver answered 2xx.")


class DeliveryOut(BaseModel):
    id: str = Field(description="The webhook-id header: the same on every attempt.")
    event: str
    status: str = Field(description="pending | delivered | failed (given up).")
    attempts: int
    next_attempt_at: float | None
    created_at: float
    finished_at: float | None
    attempt_log: list[AttemptOut]


class DeliveryList(BaseModel):
    items: list[DeliveryOut]
    count: int


def _out(hook: WebhookRecord) -> WebhookOut:
    return WebhookOut(
        id=hook.id,
        url=shown_url(hook.url),  # a row left unsealed holds the whole URL
        events=hook.events,
        description=hook.description,
        created_at=hook.created_at,
    )


def _delivery(record: WebhookDeliveryRecord, attempts: list[WebhookAttemptRecord]) -> DeliveryOut:
    return DeliveryOut(
        id=record.id,
        event=record.event,
        status=record.status,
        attempts=record.attempts,
        next_attempt_at=record.next_attempt_at,
        created_at=record.created_at,
        finished_at=record.finished_at,
        attempt_log=[AttemptOut(**a.__dict__) for a in attempts],
    )


@router.post("", status_code=201, response_model=WebhookCreated)
async def create_webhook(body: WebhookIn, services: ServicesDep) -> WebhookCreated:
    """Subscribe a URL to events; the answer holds the signing secret, shown only once."""
    hook, secret = await services.webhooks.create(body.url, body.events, body.description)
    return WebhookCreated(**_out(hook).model_dump(), secret=secret)


@router.get("", response_model=WebhookList)
async def list_webhooks(services: ServicesDep) -> WebhookList:
    items = [_out(h) for h in await services.webhooks.subscriptions()]
    return WebhookList(items=items, count=len(items))


@router.patch("/{webhook_id}", response_model=WebhookOut)
async def change_webhook(webhook_id: str, body: WebhookChange, services: ServicesDep) -> WebhookOut:
    """Change a webhook's URL, events or description (the fields given). The signing
    secret stays; a delivery still pending goes to the new URL from its next attempt."""
    hook = await services.webhooks.update(webhook_id, body.url, body.events, body.description)
    return _out(hook)


@router.delete("/{webhook_id}")
async def delete_webhook(webhook_id: str, services: ServicesDep) -> dict[str, str]:
    """Unsubscribe; deliveries not yet made are dropped."""
    await services.webhooks.delete(webhook_id)
    return {"deleted": webhook_id}


@router.get("/{webhook_id}/deliveries", response_model=DeliveryList)
async def deliveries(
    webhook_id: str,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> DeliveryList:
    """Deliveries, newest first, with a log of every attempt."""
    found = await services.webhooks.deliveries(webhook_id, limit)
    items = [_delivery(d, attempts) for d, attempts in found]
    return DeliveryList(items=items, count=len(items))
