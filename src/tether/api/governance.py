"""/api/governance: the decision audit trail and the rules."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.governance.rulebook import InvalidRules

router = APIRouter(prefix="/api/governance", tags=["governance"], route_class=ValidTextRoute)


class AuditOut(BaseModel):
    id: int
    session_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    level: str
    findings: list[dict[str, str]]
    verdict: str = Field(description="What the policy said: allow | ask | deny.")
    outcome: str = Field(description="What happened: allowed | denied.")
    decided_by: str = Field(description="policy | user | timeout | cancel | restart.")
    reason: str | None
    request_id: str | None
    created_at: float = Field(description="Epoch seconds.")


class AuditList(BaseModel):
    items: list[AuditOut]
    count: int


class RulesOut(BaseModel):
    builtin: list[dict[str, Any]]
    user: list[dict[str, Any]]


class RulesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[dict[str, Any]] = Field(max_length=500)


@router.get("/audit", response_model=AuditList)
async def audit(
    services: ServicesDep,
    session_id: Annotated[str | None, Query(min_length=1, max_length=512)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditList:
    """Governance decisions, newest first."""
    records = await services.store.governance.list_audit(session_id, limit)
    items = [AuditOut(**r.__dict__) for r in records]
    return AuditList(items=items, count=len(items))


@router.get("/rules", response_model=RulesOut)
async def get_rules(services: ServicesDep) -> RulesOut:
    """The built-in rules and the user rules in force."""
    return RulesOut(builtin=services.rules.builtin(), user=services.rules.user())


@router.put("/rules", response_model=RulesOut)
async def put_rules(body: RulesIn, services: ServicesDep) -> RulesOut:
    """Replace the user rules; they apply to the next call."""
    try:
        await services.rules.replace(body.rules)
    except InvalidRules as exc:
        raise HTTPException(422, f"invalid rules: {exc}") from None
    return RulesOut(builtin=services.rules.builtin(), user=services.rules.user())
