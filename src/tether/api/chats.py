"""/api/chats: sessions and their persisted history."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.governance.levels import parse_level

router = APIRouter(prefix="/api/chats", tags=["chats"], route_class=ValidTextRoute)


class SessionOut(BaseModel):
    session_id: str
    user_id: str
    channel: str
    title: str | None
    approval_level: str | None
    when_unattended: str | None
    created_at: float
    updated_at: float
    busy: bool
    sandbox: dict[str, Any] | None = None


class MessageOut(BaseModel):
    id: int
    kind: str
    task_id: str | None
    created_at: float
    message: dict[str, Any]


_SANDBOX_FIELDS = ("network", "memory_mb", "max_processes", "cpu_seconds")


class SessionSettings(BaseModel):
    """Fields left out keep their value; null means the server default."""

    model_config = ConfigDict(extra="forbid")
    approval_level: str | None = None
    when_unattended: Literal["deny", "wait"] | None = Field(
        None, description="For turns nobody follows: refuse calls that need a person, or wait."
    )
    network: Literal["none", "full"] | None = Field(
        None, description="Network inside the sandbox for this session's shell calls."
    )
    memory_mb: int | None = Field(None, ge=0, description="Memory per call (MB; 0: no limit).")
    max_processes: int | None = Field(None, ge=0, description="Processes per call (0: none).")
    cpu_seconds: float | None = Field(None, ge=0, description="CPU seconds per call (0: none).")

    @field_validator("memory_mb", "max_processes")
    @classmethod
    def _usable(cls, value: int | None, info: ValidationInfo) -> int | None:
        # A handful of MB or processes would fail every call, the shell's start included.
        floor = {"memory_mb": 16, "max_processes": 8}[str(info.field_name)]
        if value is not None and 0 < value < floor:
            raise ValueError(f"must be 0 (no limit) or at least {floor}")
        return value

    @field_validator("approval_level")
    @classmethod
    def _known_level(cls, value: str | None) -> str | None:
        return None if value is None else parse_level(value)


@router.get("", response_model=list[SessionOut])
async def list_sessions(services: ServicesDep) -> list[SessionOut]:
    return [
        SessionOut(
            session_id=s.id,
            user_id=s.user_id,
            channel=s.channel,
            title=s.title,
            approval_level=s.approval_level,
            when_unattended=s.when_unattended,
            created_at=s.created_at,
            updated_at=s.updated_at,
            busy=services.tasks.session_busy(s.id),
            sandbox=s.sandbox,
        )
        for s in await services.store.chats.list_sessions()
    ]


@router.get("/{session_id}/messages", response_model=list[MessageOut])
async def session_messages(session_id: str, services: ServicesDep) -> list[MessageOut]:
    if await services.store.chats.get_session(session_id) is None:
        raise HTTPException(404, "Session not found")
    return [
        MessageOut(
            id=m.id, kind=m.kind, task_id=m.task_id, created_at=m.created_at, message=m.payload
        )
        for m in await services.store.chats.history(session_id)
    ]


@router.put("/{session_id}/settings")
async def update_settings(
    session_id: str, body: SessionSettings, services: ServicesDep
) -> dict[str, Any]:
    """Set the session's approval level, unattended policy and sandbox (network, per-call
    limits); null returns a setting to the server default."""
    chats = services.store.chats
    session = await chats.get_session(session_id)
    if session is None:
        raise HTTPException(404, "Session not found")
    given = body.model_fields_set
    values = body.model_dump(include=given - set(_SANDBOX_FIELDS))
    if given & set(_SANDBOX_FIELDS):
        sandbox = {**(session.sandbox or {}), **body.model_dump(include=given)}
        values["sandbox"] = {k: sandbox[k] for k in _SANDBOX_FIELDS if sandbox.get(k) is not None}
    if not await chats.update_settings(session_id, values):
        raise HTTPException(404, "Session not found")
    session = await chats.get_session(session_id)
    assert session is not None
    return {
        "session_id": session_id,
        "approval_level": session.approval_level,
        "when_unattended": session.when_unattended,
        "sandbox": session.sandbox or {},
    }


@router.delete("/{session_id}")
async def delete_session(session_id: str, services: ServicesDep) -> dict[str, Any]:
    if services.tasks.session_busy(session_id):
        raise HTTPException(409, "The session has a running task; stop it first")
    if not await services.store.chats.delete_session(session_id):
        raise HTTPException(404, "Session not found")
    return {"deleted": session_id}
