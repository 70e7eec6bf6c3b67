"""A tool call in flight: its mutable state while the coordinator runs it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from tether.toolcalls.call import CallInfo, Invocation, can_offload
from tether.toolcalls.deadlines import Deadlines
from tether.toolcalls.launcher import EndCause, LaunchedProcess
from tether.toolcalls.output import OutputBuffer
from tether.toolcalls.state import EndState, Status, counts_down


@dataclass
class LiveCall:
    """Mutable state of a call the coordinator is running."""

    invocation: Invocation
    status: Status
    deadlines: Deadlines
    buffer: OutputBuffer
    marker: str
    started_at: float = field(default_factory=time.time)
    # When it ended (epoch seconds), once it has: its elapsed time stops there.
    finished_at: float | None = None
    # The process tree, once the tool has launched one.
    process: LaunchedProcess | None = None
    end_state: EndState | None = None
    end_reason: str | None = None
    stop_reason: str | None = None
    force_cancelled: bool = False
    # Whether its process tree was already sent a stop (see CallActions.stop).
    signalled: bool = False
    timed_out: bool = False
    # What ended its process tree, when the launcher can tell (set once the tool returned).
    end_cause: EndCause | None = None
    offload_reason: str | None = None
    human_approved: bool = False
    # What its processes used, once it ended (the launcher measures, see recorder).
    resources: dict[str, Any] | None = None
    released: asyncio.Event = field(default_factory=asyncio.Event)
    deadline_changed: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    # Held while the call is being ended: the first end is the one saved.
    ending: asyncio.Lock = field(default_factory=asyncio.Lock)
    persist_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    work: asyncio.Task[Any] | None = None

    @property
    def call_id(self) -> str:
        return self.invocation.call_id

    @property
    def session_id(self) -> str:
        return self.invocation.session_id


def live_info(call: LiveCall) -> CallInfo:
    """The public view of a call in flight (or ending: its end not yet saved, it reads
    as it will once saved)."""
    now = time.monotonic()
    offload_left, kill_left = call.deadlines.remaining(now)
    if not counts_down(call.status):
        offload_left = kill_left = None
    inv = call.invocation
    return CallInfo(
        tool_call_id=inv.call_id,
        tool_name=inv.tool_name,
        session_id=inv.session_id,
        agent_id=inv.agent_id,
        status=call.status,
        started_at=call.started_at,
        elapsed=_elapsed(call, now),
        offload_remaining=offload_left,
        kill_remaining=kill_left,
        extra=public_extra(inv.arguments, inv.task_id, call.end_reason, inv.agent_id),
        end_state=call.end_state,
        force_cancelled=call.force_cancelled,
        max_internal_timeout_secs=call.deadlines.max_timeout,
        offload_reason=call.offload_reason,
        resources=call.resources,
    )


def _elapsed(call: LiveCall, now: float) -> float:
    if call.finished_at is not None:
        return max(0.0, call.finished_at - call.started_at)
    return max(0.0, now - call.deadlines.started)


def public_extra(
    arguments: Any, task_id: str | None, end_reason: str | None, agent_id: str
) -> dict[str, Any]:
    """The ``extra`` of a call's public view: its arguments, its task, whether it can be
    moved to the background, why it ended."""
    extra: dict[str, Any] = {
        "arguments": arguments,
        "task_id": task_id,
        "offloadable": can_offload(agent_id),
    }
    if end_reason:
        extra["end_reason"] = end_reason
    return extra
