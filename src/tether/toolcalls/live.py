"""A tool call in flight and the read-only view of any call, live or finished."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from tether.store.records import ToolCallRecord
from tether.toolcalls.deadlines import Deadlines
from tether.toolcalls.output import OutputBuffer
from tether.toolcalls.state import EndState, Status


@dataclass(frozen=True)
class Invocation:
    """One tool call the model asked for."""

    call_id: str
    session_id: str
    task_id: str | None
    agent_id: str
    tool_name: str
    arguments: dict[str, Any]


@dataclass
class LiveCall:
    """Mutable state of a call the coordinator is running."""

    invocation: Invocation
    status: Status
    deadlines: Deadlines
    buffer: OutputBuffer
    marker: str
    started_at: float = field(default_factory=time.time)
    pid: int | None = None
    pgid: int | None = None
    end_state: EndState | None = None
    end_reason: str | None = None
    stop_reason: str | None = None
    force_cancelled: bool = False
    # Whether its process tree was already sent a stop (see ToolCallCoordinator._stop_many).
    signalled: bool = False
    timed_out: bool = False
    offload_reason: str | None = None
    human_approved: bool = False
    released: asyncio.Event = field(default_factory=asyncio.Event)
    deadline_changed: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    persist_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    work: asyncio.Task[Any] | None = None

    @property
    def call_id(self) -> str:
        return self.invocation.call_id

    @property
    def session_id(self) -> str:
        return self.invocation.session_id


@dataclass(frozen=True)
class CallInfo:
    """What the API shows of a call (QwenPaw's ToolCallInfo fields)."""

    tool_call_id: str
    tool_name: str
    session_id: str
    agent_id: str
    status: Status
    started_at: float
    elapsed: float
    offload_remaining: float | None
    kill_remaining: float | None
    extra: dict[str, Any]
    end_state: EndState | None
    force_cancelled: bool
    max_internal_timeout_secs: float | None
    offload_reason: str | None


def live_info(call: LiveCall) -> CallInfo:
    now = time.monotonic()
    offload_left, kill_left = call.deadlines.remaining(now)
    inv = call.invocation
    return CallInfo(
        tool_call_id=inv.call_id,
        tool_name=inv.tool_name,
        session_id=inv.session_id,
        agent_id=inv.agent_id,
        status=call.status,
        started_at=call.started_at,
        elapsed=max(0.0, now - call.deadlines.started),
        offload_remaining=offload_left,
        kill_remaining=kill_left,
        extra={"arguments": inv.arguments, "task_id": inv.task_id},
        end_state=call.end_state,
        force_cancelled=call.force_cancelled,
        max_internal_timeout_secs=call.deadlines.max_timeout,
        offload_reason=call.offload_reason,
    )


def stored_info(record: ToolCallRecord) -> CallInfo:
    end = record.finished_at or time.time()
    extra: dict[str, Any] = {"arguments": record.arguments, "task_id": record.task_id}
    if record.end_reason:
        extra["end_reason"] = record.end_reason
    return CallInfo(
        tool_call_id=record.id,
        tool_name=record.tool_name,
        session_id=record.session_id,
        agent_id=record.agent_id,
        status=record.status,  # type: ignore[arg-type]
        started_at=record.started_at,
        elapsed=max(0.0, end - record.started_at),
        offload_remaining=None,
        kill_remaining=None,
        extra=extra,
        end_state=record.end_state,  # type: ignore[arg-type]
        force_cancelled=record.force_cancelled,
        max_internal_timeout_secs=record.max_timeout,
        offload_reason=record.offload_reason,
    )
