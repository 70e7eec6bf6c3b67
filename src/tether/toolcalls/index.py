"""The in-flight index: which calls are live, by session, and how to look any call up."""

from __future__ import annotations

import time
from typing import cast

from tether.store.records import ToolCallRecord
from tether.store.toolcalls import ToolCallRepository
from tether.toolcalls.call import CallInfo
from tether.toolcalls.errors import CapacityExceeded, ToolCallConflict, ToolCallNotFound
from tether.toolcalls.live_call import LiveCall, live_info, public_extra
from tether.toolcalls.state import Status, counts_down


class CallIndex:
    """Live calls by id and by session, with the store behind them for ended calls."""

    def __init__(self, repo: ToolCallRepository, max_per_session: int, max_total: int) -> None:
        self._repo = repo
        self._max_per_session = max_per_session
        self._max_total = max_total
        self._live: dict[str, LiveCall] = {}
        self._by_session: dict[str, dict[str, LiveCall]] = {}

    def add(self, call: LiveCall, *, limited: bool = True) -> None:
        """Index a new call; if ``limited``, refuse it (CapacityExceeded, the model is
        told) when too many are in flight.

        The limits are checked and the place taken here in one step, with no await
        between: the calls of one model reply start together and must not all pass the
        check before any of them is counted.
        """
        in_session = len(self._by_session.get(call.session_id, {}))
        if limited and (in_session >= self._max_per_session or len(self._live) >= self._max_total):
            raise CapacityExceeded(
                "too many tool calls are in flight; wait for some to finish and try again"
            )
        self._live[call.call_id] = call
        self._by_session.setdefault(call.session_id, {})[call.call_id] = call

    def forget(self, call: LiveCall) -> None:
        self._live.pop(call.call_id, None)
        session = self._by_session.get(call.session_id)
        if session is not None:
            session.pop(call.call_id, None)
            if not session:
                del self._by_session[call.session_id]

    def get(self, session_id: str, call_id: str) -> LiveCall | None:
        """The live call, if it is in flight in that session."""
        call = self._live.get(call_id)
        return call if call is not None and call.session_id == session_id else None

    def by_id(self, call_id: str) -> LiveCall | None:
        return self._live.get(call_id)

    def all(self) -> list[LiveCall]:
        return list(self._live.values())

    def of_task(self, task_id: str) -> list[LiveCall]:
        return [c for c in self._live.values() if c.invocation.task_id == task_id]

    def list_live(self, session_id: str) -> list[CallInfo]:
        """Calls in flight for a session, oldest first.

        A call that has ended is left out even while its end is still being saved."""
        calls = self._by_session.get(session_id, {}).values()
        in_flight = (live_info(c) for c in calls if c.status != "completed")
        return sorted(in_flight, key=lambda i: i.started_at)

    async def info(self, session_id: str, call_id: str) -> CallInfo:
        """Any call of the session, live or from the store; ToolCallNotFound otherwise."""
        call = self.get(session_id, call_id)
        if call is not None:
            return live_info(call)
        record = await self._repo.get(session_id, call_id)
        if record is None:
            raise ToolCallNotFound(call_id)
        return stored_info(record)

    async def require_live(self, session_id: str, call_id: str) -> LiveCall:
        """The live call; ToolCallNotFound if unknown, ToolCallConflict if it has ended."""
        call = self.get(session_id, call_id)
        if call is not None:
            return call
        if await self._repo.get(session_id, call_id) is None:
            raise ToolCallNotFound(call_id)
        raise ToolCallConflict("the tool call has already completed")


def stored_info(record: ToolCallRecord) -> CallInfo:
    """The public view of a call from its stored record (for one in flight on another
    node, with the deadlines that node stored)."""
    now = time.time()
    end = record.finished_at or now
    status = cast(Status, record.status)
    shown = counts_down(status)
    return CallInfo(
        tool_call_id=record.id,
        tool_name=record.tool_name,
        session_id=record.session_id,
        agent_id=record.agent_id,
        status=status,
        started_at=record.started_at,
        elapsed=max(0.0, end - record.started_at),
        offload_remaining=_left(record.offload_at, now) if shown else None,
        kill_remaining=_left(record.kill_at, now) if shown else None,
        extra=public_extra(record.arguments, record.task_id, record.end_reason, record.agent_id),
        end_state=record.end_state,  # type: ignore[arg-type]
        force_cancelled=record.force_cancelled,
        max_internal_timeout_secs=record.max_timeout,
        offload_reason=record.offload_reason,
        resources=record.resources,
    )


def _left(at: float | None, now: float) -> float | None:
    return None if at is None else max(0.0, at - now)
