"""/api/console/chat: running a turn (streamed, or as a background task) and stopping it.

The chats themselves (list, create, history, delete) are in ``api/chats.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from tether.api.deps import ServicesDep
from tether.api.runtime_stream import RuntimeStream
from tether.api.sse import SSE_HEADERS, sse_event
from tether.api.valid_json import ValidTextRoute
from tether.governance.levels import parse_level
from tether.services import Services
from tether.session_ids import routable
from tether.store.tables import SESSION_ID_CHARS

router = APIRouter(prefix="/api/console/chat", tags=["chat"], route_class=ValidTextRoute)


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class InputMessage(BaseModel):
    role: Literal["user"] = "user"
    type: Literal["message"] = "message"
    content: list[TextPart] | str

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content)


class RequestContext(BaseModel):
    model_config = ConfigDict(extra="allow")
    approval_level: str | None = None

    @field_validator("approval_level")
    @classmethod
    def _known_level(cls, value: str | None) -> str | None:
        return None if value is None else parse_level(value)


def _routable(session_id: str | None) -> str | None:
    return None if session_id is None else routable(session_id)


class ChatRequest(BaseModel):
    """QwenPaw's agent request: who speaks, in which session, and what they say."""

    channel: str = Field("console", min_length=1, max_length=64)
    user_id: str = Field("default", min_length=1, max_length=256)
    session_id: Annotated[str | None, AfterValidator(_routable)] = Field(
        None, min_length=1, max_length=SESSION_ID_CHARS
    )
    input: list[InputMessage] = Field(min_length=1)
    request_context: RequestContext = Field(default_factory=RequestContext)
    timeout: float | None = Field(
        None, gt=0, le=86400, description="Seconds before the task is stopped as failed."
    )

    @model_validator(mode="after")
    def _has_text(self) -> ChatRequest:
        if not any(m.text().strip() for m in self.input):
            raise ValueError("input must contain at least one non-empty text message")
        return self

    @model_validator(mode="after")
    def _routable_session(self) -> ChatRequest:
        # Made of channel and user_id when none is given: those must fit a path too.
        routable(self.resolved_session_id)
        return self

    @property
    def resolved_session_id(self) -> str:
        return self.session_id or f"{self.channel}:{self.user_id}"


class TaskSubmitted(BaseModel):
    task_id: str
    timeout: float | None = Field(description="The task's time limit; null: none.")
    session_id: str


class TaskOut(BaseModel):
    task_id: str
    session_id: str
    status: Literal["pending", "running", "finished"]
    trigger: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    result: dict[str, Any] | None
    messages: list[dict[str, Any]]


class StopOut(BaseModel):
    stopped: bool


def _result_out(result: dict[str, Any] | None, session_id: str) -> dict[str, Any] | None:
    """A finished task's result as QwenPaw gives it: an error is ``{message}``."""
    if result is None:
        return None
    out = {**result, "session_id": session_id}
    if isinstance(out.get("error"), str):
        out["error"] = {"message": out["error"]}
    return out


async def _submit(body: ChatRequest, services: Services, *, attended: bool) -> TaskSubmitted:
    session_id = body.resolved_session_id
    task_id = await services.tasks.submit(
        session_id,
        body.user_id,
        body.channel,
        [m.text() for m in body.input if m.text().strip()],
        body.request_context.approval_level,
        time_limit=body.timeout,
        attended=attended,
    )
    return TaskSubmitted(task_id=task_id, timeout=body.timeout, session_id=session_id)


@router.post("/task", response_model=TaskSubmitted)
async def submit_task(body: ChatRequest, services: ServicesDep) -> TaskSubmitted:
    """Start a turn in the background; poll it with GET /task/{task_id}.

    Nobody follows such a turn: a call that needs approval follows the unattended
    policy (``when_unattended``)."""
    return await _submit(body, services, attended=False)


@router.get("/task/{task_id}", response_model=TaskOut)
async def get_task(task_id: str, services: ServicesDep) -> TaskOut:
    """The task's status, and its result once ``finished``."""
    view = await services.tasks.get(task_id)
    r = view.record
    return TaskOut(
        task_id=r.id,
        session_id=r.session_id,
        status=r.status,
        trigger=r.trigger,
        created_at=r.created_at,
        started_at=r.started_at,
        finished_at=r.finished_at,
        result=_result_out(r.result, r.session_id) if r.status == "finished" else None,
        messages=view.messages,
    )


@router.post("/task/{task_id}/stop")
async def stop_task(task_id: str, services: ServicesDep) -> dict[str, Any]:
    """Stop the turn and every tool call it started (a Tether route)."""
    stopped = await services.tasks.stop(task_id)
    return {"task_id": task_id, "stopped": stopped}


@router.post("/stop", response_model=StopOut)
async def stop_chat(
    services: ServicesDep,
    chat_id: Annotated[str, Query(min_length=1, max_length=SESSION_ID_CHARS)],
) -> StopOut:
    """Stop the chat's running turn and its tool calls; ``stopped: false`` if none ran.

    A chat's id is its session id, so either names it."""
    return StopOut(stopped=await services.tasks.stop_session(chat_id))


@router.post("")
async def chat_stream(
    body: ChatRequest,
    services: ServicesDep,
    events: Annotated[
        Literal["qwenpaw", "tether"],
        Query(description="qwenpaw: QwenPaw's runtime frames; tether: Tether's events."),
    ] = "qwenpaw",
) -> StreamingResponse:
    """Run a turn and stream it (SSE) until it ends, or until the server exits: then a
    last frame says so (the turn goes on after a restart, or is stopped)."""
    submitted = await _submit(body, services, attended=True)
    # Ended at the exit, so an open stream does not hold it for uvicorn's grace; what
    # the turn emitted by then (its final, if it just ended) still goes out first.
    feed = services.tasks.follow(submitted.task_id, until=services.exiting)
    source = feed if feed is not None else _nothing()
    note = _ExitNote(services, submitted.task_id)
    frames = (
        _tether_frames(submitted, source, note)
        if events == "tether"
        else _runtime_frames(submitted, source, note)
    )
    return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)


@dataclass(frozen=True)
class _ExitNote:
    """What a stream cut by the server's exit tells its client of the turn."""

    services: Services
    task_id: str

    @property
    def cut(self) -> bool:
        """Whether the stream ended because the server exits."""
        return self.services.exiting.is_set()

    @property
    def turn_goes_on(self) -> bool:
        return self.services.settings.detaches_at_exit

    @property
    def message(self) -> str:
        if self.turn_goes_on:
            return (
                "The server is restarting: this turn goes on once it is back "
                f"(GET /api/console/chat/task/{self.task_id} says how it ends)."
            )
        return "The server is shutting down: this turn is stopped."


async def _nothing() -> AsyncGenerator[list[dict[str, Any]]]:
    return
    yield  # an async generator that ends at once


async def _tether_frames(
    submitted: TaskSubmitted, feed: AsyncGenerator[list[dict[str, Any]]], exiting: _ExitNote
) -> AsyncIterator[str]:
    yield sse_event({"type": "task", **submitted.model_dump()})
    ended = False
    async with contextlib.aclosing(feed):
        async for batch in feed:
            ended = ended or any(event["type"] == "final" for event in batch)
            yield "".join(sse_event(event) for event in batch)  # one write per batch
    if not ended and exiting.cut:
        yield sse_event(
            {
                "type": "server_exiting",
                "task_id": submitted.task_id,
                "turn": "continues" if exiting.turn_goes_on else "stopped",
                "message": exiting.message,
            }
        )


async def _runtime_frames(
    submitted: TaskSubmitted, feed: AsyncGenerator[list[dict[str, Any]]], exiting: _ExitNote
) -> AsyncIterator[str]:
    stream = RuntimeStream(submitted.session_id, submitted.task_id)
    for frame in stream.start():
        yield sse_event(frame)
    async with contextlib.aclosing(feed):
        async for batch in feed:
            if written := "".join(sse_event(f) for event in batch for f in stream.feed(event)):
                yield written
    if not stream.ended and exiting.cut:
        yield "".join(sse_event(f) for f in stream.cut_short(exiting.message))
