"""/api/governance: the decision audit trail and the rules."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.errors import Invalid
from tether.services import Services
from tether.store.records import AuditQuery
from tether.store.tables import SESSION_ID_CHARS

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
    decided_by: str = Field(
        description="policy | user | timeout | cancel | restart | remembered | unattended | "
        "unknown-tool | invalid-arguments | capacity."
    )
    reason: str | None
    request_id: str | None
    rule_id: str | None = Field(description="The remembered rule that decided, if one did.")
    created_at: float = Field(description="Epoch seconds.")
    sandbox: dict[str, Any] | None = Field(
        None,
        description="For shell calls: sandboxed, network, memory_mb, max_processes, cpu_seconds.",
    )


class AuditList(BaseModel):
    items: list[AuditOut]
    count: int


class RememberedRuleOut(BaseModel):
    id: str
    action: str = Field(description="approve | deny.")
    scope: str = Field(description="exact | similar.")
    tool_name: str
    pattern: str
    finding_ids: list[str] = Field(description="Findings an approval covers; no others.")
    session_id: str | None = Field(description="null: always (kept across restarts).")
    request_id: str | None
    created_at: float


class RulesOut(BaseModel):
    builtin: list[dict[str, Any]]
    user: list[dict[str, Any]]
    remembered: list[RememberedRuleOut] = Field(
        description="Decisions people asked to remember; revoke with DELETE .../remembered/{id}."
    )


async def _rules(services: Services) -> RulesOut:
    remembered = [RememberedRuleOut(**r.__dict__) for r in await services.memory.rules()]
    return RulesOut(
        builtin=services.rules.builtin(), user=services.rules.user(), remembered=remembered
    )


class RulesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[dict[str, Any]] = Field(max_length=500)


@router.get("/audit", response_model=AuditList)
async def audit(
    services: ServicesDep,
    session_id: Annotated[str | None, Query(min_length=1, max_length=SESSION_ID_CHARS)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditList:
    """Governance decisions, newest first."""
    records = await services.store.governance.list_audit(session_id, limit)
    items = [AuditOut(**r.__dict__) for r in records]
    return AuditList(items=items, count=len(items))


_EXPORT_PAGE = 500
_TIME_HELP = "Epoch seconds or an ISO 8601 time with a zone offset."


def _instant(name: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise Invalid(f"{name} must be a finite number of epoch seconds, got {value!r}")
        return number
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(f"{name} must be epoch seconds or an ISO 8601 time, got {value!r}") from None
    if moment.utcoffset() is None:
        raise Invalid(f"{name} needs a zone offset (e.g. Z or +02:00): {value!r}")
    return moment.timestamp()


@router.get(
    "/audit/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
async def export_audit(
    services: ServicesDep,
    since: Annotated[str | None, Query(description=_TIME_HELP, max_length=64)] = None,
    until: Annotated[str | None, Query(description=_TIME_HELP, max_length=64)] = None,
    session_id: Annotated[str | None, Query(min_length=1, max_length=SESSION_ID_CHARS)] = None,
    decision: Literal["allowed", "denied"] | None = None,
) -> StreamingResponse:
    """Every matching decision, oldest first, one JSON object per line (JSON Lines).

    ``since`` is inclusive, ``until`` exclusive; ``decision`` filters on the outcome.
    """
    query = AuditQuery(_instant("since", since), _instant("until", until), session_id, decision)
    repo = services.store.governance

    async def lines() -> AsyncIterator[str]:
        after = 0
        while True:
            page = await repo.audit_page(query, after, _EXPORT_PAGE)
            for record in page:
                yield json.dumps(AuditOut(**record.__dict__).model_dump()) + "\n"
            if len(page) < _EXPORT_PAGE:
                return
            after = page[-1].id

    return StreamingResponse(lines(), media_type="application/x-ndjson")


@router.get("/rules", response_model=RulesOut)
async def get_rules(services: ServicesDep) -> RulesOut:
    """The built-in rules, the user rules and the remembered decisions in force."""
    return await _rules(services)


@router.put("/rules", response_model=RulesOut)
async def put_rules(body: RulesIn, services: ServicesDep) -> RulesOut:
    """Replace the user rules; they apply to the next call."""
    await services.rules.replace(body.rules)
    return await _rules(services)


@router.delete("/rules/remembered/{rule_id}", response_model=RulesOut)
async def revoke_remembered(rule_id: str, services: ServicesDep) -> RulesOut:
    """Revoke a remembered decision; later calls are decided by policy (and people) again."""
    await services.memory.revoke(rule_id)
    return await _rules(services)
