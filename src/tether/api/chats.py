"""/api/chats: QwenPaw's chat routes over Tether's sessions, and Tether's own extras.

A chat's ``id`` is its session id (see ``tether.tasks.chats``). Times are ISO-8601.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.governance.levels import parse_level
from tether.sandbox.limits import (
    LEAST_MEMORY_MB,
    LEAST_PROCESSES,
    MOST_CPU_SECONDS,
    MOST_MEMORY_MB,
    MOST_PROCESSES,
)
from tether.session_ids import routable
from tether.store.tables import SESSION_ID_CHARS
from tether.tasks.chats import DEFAULT_CHAT_NAME, ChatView

router = APIRouter(prefix="/api/chats", tags=["chats"], route_class=ValidTextRoute)

#: A cron job's own session is named after it; QwenPaw marks such chats "cron".
_CRON_PREFIX = "cron:"


class ChatSpec(BaseModel):
    id: str
    name: str
    session_id: str
    user_id: str
    channel: str
    created_at: datetime
    updated_at: datetime
    last_finished_at: datetime | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    status: Literal["idle", "running"]
    pinned: bool = False
    archived_at: datetime | None = None
    archived: bool = False
    source: Literal["chat", "cron"]
    group_id: str | None = None
    parent_session_id: str | None = None
    root_session_id: str | None = None
    approval_level: str | None = Field(description="Tether: the chat's approval level.")
    when_unattended: str | None = Field(
        description="Tether: deny or wait when nobody follows a turn (null: the default)."
    )
    sandbox: dict[str, Any] | None = Field(
        None, description="Tether: the chat's sandbox settings (network, per-call limits)."
    )


#: QwenPaw's bound on a chat's name; a longer one is cut to it, as QwenPaw cuts it.
CHAT_NAME_CHARS = 500


def _cut_name(value: object) -> object:
    return value[:CHAT_NAME_CHARS] if isinstance(value, str) else value


class ChatCreate(BaseModel):
    """QwenPaw's chat spec as a client sends it; ids and times are the server's."""

    name: Annotated[str, BeforeValidator(_cut_name)] = DEFAULT_CHAT_NAME
    session_id: Annotated[str, AfterValidator(routable)] = Field(
        min_length=1, max_length=SESSION_ID_CHARS
    )
    user_id: str = Field(min_length=1, max_length=256)
    channel: str = Field("console", min_length=1, max_length=64)
    meta: dict[str, Any] = Field(default_factory=dict)


class ChatUpdate(BaseModel):
    """QwenPaw's chat update (its console renames a chat with it)."""

    model_config = ConfigDict(extra="forbid")
    name: Annotated[str | None, BeforeValidator(_cut_name)] = Field(
        None, min_length=1, description="The new name (null or left out: unchanged)."
    )
    pinned: Literal[False] | None = Field(None, description="Tether does not pin chats.")
    group_id: None = Field(None, description="Tether does not group chats.")


class ChatHistoryOut(BaseModel):
    messages: list[dict[str, Any]]
    status: Literal["idle", "running"]


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
    memory_mb: int | None = Field(
        None, ge=0, le=MOST_MEMORY_MB, description="Memory per call (MB; 0: no limit)."
    )
    max_processes: int | None = Field(
        None, ge=0, le=MOST_PROCESSES, description="Processes per call (0: none)."
    )
    cpu_seconds: float | None = Field(
        None,
        ge=0,
        le=MOST_CPU_SECONDS,
        allow_inf_nan=False,
        description="CPU seconds per call (0: none).",
    )

    @field_validator("memory_mb", "max_processes")
    @classmethod
    def _usable(cls, value: int | None, info: ValidationInfo) -> int | None:
        # A handful of MB or processes would fail every call, the shell's start included.
        floor = {"memory_mb": LEAST_MEMORY_MB, "max_processes": LEAST_PROCESSES}[
            str(info.field_name)
        ]
        if value is not None and 0 < value < floor:
            raise ValueError(f"must be 0 (no limit) or at least {floor}")
        return value

    @field_validator("approval_level")
    @classmethod
    def _known_level(cls, value: str | None) -> str | None:
        return None if value is None else parse_level(value)


def _iso(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _status(running: bool) -> Literal["idle", "running"]:
    return "running" if running else "idle"


def _spec(view: ChatView) -> ChatSpec:
    s = view.session
    return ChatSpec(
        id=s.id,
        name=s.title or DEFAULT_CHAT_NAME,
        session_id=s.id,
        user_id=s.user_id,
        channel=s.channel,
        created_at=_iso(s.created_at),
        updated_at=_iso(s.updated_at),
        status=_status(view.running),
        source="cron" if s.id.startswith(_CRON_PREFIX) else "chat",
        approval_level=s.approval_level,
        when_unattended=s.when_unattended,
        sandbox=s.sandbox,
    )


@router.get("", response_model=list[ChatSpec])
async def list_chats(
    services: ServicesDep,
    user_id: Annotated[str | None, Query(max_length=256)] = None,
    channel: Annotated[str | None, Query(max_length=64)] = None,
    archived: Annotated[
        bool | None,
        Query(description="true: archived chats only (Tether archives none); false: active."),
    ] = None,
) -> list[ChatSpec]:
    """Chats, most recently updated first."""
    if archived:
        return []
    return [_spec(v) for v in await services.chats.all(user_id, channel)]


@router.post("", response_model=ChatSpec)
async def create_chat(body: ChatCreate, services: ServicesDep) -> ChatSpec:
    """Create the chat for ``session_id`` (an existing one is returned as it is)."""
    view = await services.chats.create(body.session_id, body.user_id, body.channel, body.name)
    return _spec(view)


@router.get("/{chat_id}", response_model=ChatHistoryOut)
async def get_chat(chat_id: str, services: ServicesDep) -> ChatHistoryOut:
    """The chat's messages (QwenPaw's runtime form) and whether a turn is running."""
    history = await services.chats.history(chat_id)
    return ChatHistoryOut(messages=history.messages, status=_status(history.running))


@router.put("/{chat_id}", response_model=ChatSpec)
async def update_chat(chat_id: str, body: ChatUpdate, services: ServicesDep) -> ChatSpec:
    """Rename the chat (QwenPaw's update); its ``updated_at`` moves, as in QwenPaw."""
    return _spec(await services.chats.rename(chat_id, body.name))


@router.delete("/{chat_id}")
async def delete_chat(chat_id: str, services: ServicesDep) -> dict[str, Any]:
    """Stop the chat's running turn, then delete it with its history."""
    await services.chats.delete(chat_id)
    return {"deleted": True}


@router.get("/{chat_id}/messages", response_model=list[MessageOut])
async def chat_messages(chat_id: str, services: ServicesDep) -> list[MessageOut]:
    """Tether: the stored messages as the model saw them (OpenAI form)."""
    return [
        MessageOut(
            id=m.id, kind=m.kind, task_id=m.task_id, created_at=m.created_at, message=m.payload
        )
        for m in await services.chats.messages(chat_id)
    ]


@router.put("/{chat_id}/settings")
async def update_settings(
    chat_id: str, body: SessionSettings, services: ServicesDep
) -> dict[str, Any]:
    """Tether: the chat's approval level, unattended policy and sandbox (network, per-call
    limits); null returns a setting to the server default."""
    given = body.model_fields_set
    values = body.model_dump(include=given - set(_SANDBOX_FIELDS))
    if given & set(_SANDBOX_FIELDS):
        current = (await services.chats.get(chat_id)).session.sandbox or {}
        sandbox = {**current, **body.model_dump(include=given)}
        values["sandbox"] = {k: sandbox[k] for k in _SANDBOX_FIELDS if sandbox.get(k) is not None}
    session = (await services.chats.update_settings(chat_id, values)).session
    return {
        "session_id": chat_id,
        "approval_level": session.approval_level,
        "when_unattended": session.when_unattended,
        "sandbox": session.sandbox or {},
    }
