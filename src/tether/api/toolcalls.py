"""/api/tool-calls: list, inspect, stream, extend, offload and cancel tool calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Query
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tether.api.deps import ServicesDep
from tether.api.sse import SSE_HEADERS, sse_event
from tether.api.valid_json import ValidTextRoute
from tether.errors import NotFound
from tether.services import Services
from tether.store.records import OutputChunk
from tether.toolcalls.call import CallInfo
from tether.waits import until_set

router = APIRouter(prefix="/api/tool-calls", tags=["tool-calls"], route_class=ValidTextRoute)


class ToolCallInfoOut(BaseModel):
    tool_call_id: str
    tool_name: str
    session_id: str
    agent_id: str
    status: Literal["awaiting_approval", "running", "offloaded", "completed"]
    started_at: float = Field(description="Epoch seconds.")
    elapsed: float
    offload_remaining: float | None
    kill_remaining: float | None
    extra: dict[str, Any]
    end_state: Literal["success", "error", "cancelled", "timeout", "denied"] | None
    force_cancelled: bool
    max_internal_timeout_secs: float | None
    offload_reason: str | None
    resources: dict[str, Any] | None = Field(
        None,
        description="What the call used once it ended: peak_memory_bytes, cpu_seconds, "
        "processes_peak (the sandbox's own two bwrap processes included, as they count "
        "against the limit), killed_by (null | memory | processes | cpu | deadline | cancel).",
    )


class ToolCallList(BaseModel):
    items: list[ToolCallInfoOut]
    total: int


# Strict: "yes" or 1 for a boolean, or "5" for seconds, is a mistake to report, not to guess.
class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    force: bool = Field(False, description="SIGKILL the process tree at once.")


# An extension past this is a mistake (or an attack on the deadline's arithmetic):
# Infinity was stored as an offload time the API then showed as none.
_A_YEAR = 365 * 86_400


class ExtendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    seconds: float | None = Field(
        None,
        gt=0,
        le=_A_YEAR,
        allow_inf_nan=False,
        description="How much later the deadline moves (at most a year).",
    )
    no_deadline: bool = Field(False, description="Remove the deadline instead.")
    target: Literal["kill", "offload"] = "kill"

    @model_validator(mode="after")
    def _one_of(self) -> ExtendRequest:
        if self.no_deadline == (self.seconds is not None):
            raise ValueError("give either seconds (> 0) or no_deadline: true")
        return self


class Accepted(BaseModel):
    status: Literal["accepted"] = "accepted"
    tool_call_id: str


class ExtendAccepted(Accepted):
    offload_remaining: float | None
    kill_remaining: float | None


class OutputPart(BaseModel):
    type: Literal["text"] = "text"
    text: str


class OutputOut(BaseModel):
    tool_call_id: str
    is_closed: bool
    final_state: str | None
    content: list[OutputPart]


class OutputTailOut(OutputOut):
    """The output's end only (``?tail=``), and how much came before it."""

    omitted_chars: int = Field(description="Characters printed before the ones sent.")


#: The most a ``tail`` may ask for; any more is the whole output anyway.
_MOST_TAIL = 1 << 30


def _out(info: CallInfo) -> ToolCallInfoOut:
    return ToolCallInfoOut(**info.__dict__)


@router.get("/{session_id}", response_model=ToolCallList)
async def list_calls(session_id: str, services: ServicesDep) -> ToolCallList:
    """Calls in flight for the session (completed ones are under their own id)."""
    items = [_out(i) for i in await services.calls.list_live(session_id)]
    return ToolCallList(items=items, total=len(items))


@router.get("/{session_id}/{tool_call_id}", response_model=ToolCallInfoOut)
async def get_call(session_id: str, tool_call_id: str, services: ServicesDep) -> ToolCallInfoOut:
    return _out(await services.calls.info(session_id, tool_call_id))


@router.post("/{session_id}/{tool_call_id}/cancel", status_code=202, response_model=Accepted)
async def cancel_call(
    session_id: str,
    tool_call_id: str,
    services: ServicesDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    """Stop the call's whole process tree (gracefully, or at once with ``force``)."""
    force = body.force if body else False
    await services.calls.cancel(session_id, tool_call_id, force)
    return Accepted(tool_call_id=tool_call_id)


@router.post("/{session_id}/{tool_call_id}/offload", status_code=202, response_model=Accepted)
async def offload_call(session_id: str, tool_call_id: str, services: ServicesDep) -> Accepted:
    """Move the call to the background; the agent goes on and gets its result later."""
    await services.calls.offload(session_id, tool_call_id)
    return Accepted(tool_call_id=tool_call_id)


@router.post(
    "/{session_id}/{tool_call_id}/extend-deadline", status_code=202, response_model=ExtendAccepted
)
async def extend_deadline(
    session_id: str, tool_call_id: str, body: ExtendRequest, services: ServicesDep
) -> ExtendAccepted:
    """Move the kill (default) or offload deadline later, or remove it."""
    seconds = None if body.no_deadline else body.seconds
    info = await services.calls.extend(session_id, tool_call_id, body.target, seconds)
    return ExtendAccepted(
        tool_call_id=tool_call_id,
        offload_remaining=info.offload_remaining,
        kill_remaining=info.kill_remaining,
    )


@router.get("/{session_id}/{tool_call_id}/output", response_model=OutputOut | OutputTailOut)
async def get_output(
    session_id: str,
    tool_call_id: str,
    services: ServicesDep,
    tail: Annotated[int | None, Query(ge=1, le=_MOST_TAIL)] = None,
) -> OutputOut:
    """Everything the call has printed so far; with ``tail``, only its last ``tail``
    characters and the count of those left out (what a page polling a call shows)."""
    output = await services.calls.output(session_id, tool_call_id)
    sent, omitted = (output.text, 0) if tail is None else output.tail(tail)
    fields: dict[str, Any] = {
        "tool_call_id": tool_call_id,
        "is_closed": output.closed,
        "final_state": output.end_state,
        "content": [OutputPart(text=sent)] if sent else [],
    }
    if tail is None:
        return OutputOut(**fields)
    return OutputTailOut(**fields, omitted_chars=omitted)


#: The highest chunk number the store can hold.
_LAST_SEQ = 2**31 - 1


@router.get("/{session_id}/{tool_call_id}/stream", response_model=None)
async def stream_output(
    session_id: str,
    tool_call_id: str,
    services: ServicesDep,
    # An id this stream gave (a chunk's number): ASCII digits. Empty: the start (some
    # clients send the empty id a stream begins with).
    last_event_id: Annotated[str | None, Header(pattern=r"^[0-9]{0,18}$")] = None,
) -> Response:
    """SSE: the output from the start (or after ``Last-Event-ID``), live, then ``done``,
    numbered one past the last chunk. Resumed after ``done`` itself: 204, nothing more
    (an EventSource stops reconnecting on a 204)."""
    final = await services.calls.final_seq(session_id, tool_call_id)
    # Past the store's column (a 32-bit integer) no chunk can follow it anyway.
    after = min(int(last_event_id), _LAST_SEQ) if last_event_id else 0
    if final is not None and after == final + 1:
        return Response(status_code=204, headers=SSE_HEADERS)

    async def frames() -> AsyncIterator[str]:
        follow = services.calls.follow(session_id, tool_call_id, after)
        sent = 0
        try:
            async for item in follow:
                if isinstance(item, OutputChunk):
                    sent = item.seq
                    # QwenPaw's frame ("chunk" with a text block), plus which stream it was.
                    frame = {
                        "type": "chunk",
                        "data": {"type": "text", "text": item.text},
                        "stream": item.stream,
                        "text": item.text,
                    }
                    yield sse_event(frame, event_id=item.seq)
                else:
                    done = {"type": "done", "end_state": item.end_state, "status": item.status}
                    yield sse_event(done, event_id=await _done_id(services, item, after, sent))
        except NotFound:
            # Its chat was deleted while the stream ran: the stream ends there (a resume
            # is a 404), not with an error in the middle of the response.
            return

    return StreamingResponse(
        until_set(services.exiting, frames()), media_type="text/event-stream", headers=SSE_HEADERS
    )


async def _done_id(services: Services, info: CallInfo, after: int, sent: int) -> int:
    """``done``'s event id: one past the call's last chunk whatever id the client resumed
    after, so a resume with it is told there is nothing more (it was sent ``done`` again,
    one id higher each time, for ever). ``sent``: the last chunk sent (0: none)."""
    try:
        final = await services.calls.final_seq(info.session_id, info.tool_call_id)
    except NotFound:  # deleted (its chat) since it ended: a resume is a 404 anyway
        final = None
    if final is None:  # not ended as the store sees it, or gone
        return max(after, sent) + 1
    # Past the store's last only if a chunk only Redis had was sent (its node died).
    return max(final, sent) + 1
