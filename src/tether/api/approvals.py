"""/api/approval: calls waiting for a person, and the person's answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.governance.approvals import approval_view
from tether.services import Services
from tether.store.tables import SESSION_ID_CHARS

router = APIRouter(prefix="/api/approval", tags=["approvals"], route_class=ValidTextRoute)


class Finding(BaseModel):
    rule_id: str
    severity: str
    description: str


class PendingApproval(BaseModel):
    """QwenPaw's fields first, then Tether's (the call's id, arguments and findings)."""

    request_id: str
    session_id: str
    root_session_id: str
    agent_id: str
    owner_agent_id: str
    tool_name: str
    tool_display_name: str
    tool_source: str = Field(description="The rule behind the first finding.")
    exact_target: str
    similar_target: str
    is_generalized: bool
    reasoning: str
    severity: str = Field(description="The highest finding's severity, lower case.")
    findings_count: int
    created_at: float = Field(description="Epoch seconds.")
    timeout_seconds: float
    result_summary: str
    tool_call_id: str
    arguments: dict[str, Any]
    findings: list[Finding]
    expires_at: float = Field(description="Epoch seconds; unanswered by then, it is denied.")
    patterns: dict[str, str | None] = Field(
        description="What a remembered decision would match: `exact` (this call) and "
        "`similar` (null when the call has no similar pattern)."
    )


class PendingList(BaseModel):
    pending_approvals: list[PendingApproval]
    count: int


class DecisionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    request_id: str = Field(min_length=1, max_length=64)
    session_id: str = Field(min_length=1, max_length=SESSION_ID_CHARS)
    user_id: str | None = Field(None, max_length=256)
    reason: str | None = Field(None, max_length=2000)
    # QwenPaw sends null for "no scope"; it means this call only.
    scope: Literal["once", "exact", "similar"] | None = Field(
        "once",
        description="once (or null): this call only; exact: this literal call again; similar: "
        "calls matching the approval's similar pattern.",
    )
    remember: Literal["session", "always"] = Field(
        "session",
        description="With exact or similar: for the rest of this session, or always (kept "
        "across restarts, listed and revocable under /api/governance/rules).",
    )


class RememberedOut(BaseModel):
    id: str
    pattern: str


class DecisionOut(BaseModel):
    success: bool
    message: str
    tool_name: str
    request_id: str
    remembered: RememberedOut | None = None


@router.get("/list", response_model=PendingList)
async def list_pending(
    services: ServicesDep,
    session_id: Annotated[str | None, Query(min_length=1, max_length=SESSION_ID_CHARS)] = None,
) -> PendingList:
    """Approvals still waiting, oldest first (all sessions unless ``session_id``)."""
    items = [
        PendingApproval(**approval_view(r))
        for r in await services.approvals.pending_anywhere(session_id)
    ]
    return PendingList(pending_approvals=items, count=len(items))


async def _decide(body: DecisionRequest, approve: bool, services: Services) -> DecisionOut:
    record, rule = await services.approvals.resolve(
        body.request_id, body.session_id, approve, body.reason, body.scope or "once", body.remember
    )
    tool = record.tool_name
    message = (
        f"Tool '{tool}' approved, executing..."
        if approve
        else f"Tool '{tool}' denied: {body.reason or 'User denied'}"
    )
    remembered = RememberedOut(id=rule.id, pattern=rule.pattern) if rule else None
    return DecisionOut(
        success=True,
        message=message,
        tool_name=tool,
        request_id=body.request_id,
        remembered=remembered,
    )


@router.post("/approve", response_model=DecisionOut)
async def approve(body: DecisionRequest, services: ServicesDep) -> DecisionOut:
    """Let the waiting call run."""
    return await _decide(body, True, services)


@router.post("/deny", response_model=DecisionOut)
async def deny(body: DecisionRequest, services: ServicesDep) -> DecisionOut:
    """Refuse the waiting call; the model is told, with ``reason`` if given."""
    return await _decide(body, False, services)
