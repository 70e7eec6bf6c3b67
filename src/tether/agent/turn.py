"""One agent turn, as a loop of explicit steps."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from tether import model_texts
from tether.agent.calls import run_tool_call
from tether.agent.history import by_turn, repair
from tether.agent.ports import ATTENDED, Attendance, Gate, TurnEvents
from tether.errors import TetherError
from tether.llm.client import ModelError, RequestedCall
from tether.llm.provider_service import ProviderService
from tether.llm.reply import check_reply, with_distinct_ids
from tether.llm.wire import TETHER_CALL_ID, assistant_message
from tether.store.chats import ChatRepository
from tether.store.deliveries import DeliveryRepository
from tether.store.records import OutputChunk
from tether.text import valid_data
from tether.toolcalls.call import CallInfo, Invocation
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.toolcalls.ids import new_call_id
from tether.tools.base import ToolInputError
from tether.tools.registry import ToolRegistry

AGENT_ID = "default"
# Of arguments that are not valid JSON, this much is kept in the audit.
_RAW_ARGUMENTS_KEPT = 2000


class StepLimitReached(TetherError):
    """The model kept calling tools past the step limit."""


class TurnEndedElsewhere(TetherError):
    """The turn's task was ended by another node while this one ran it (see
    ``ChatRepository.append_to_turn``): nothing more of the turn is stored."""

    @classmethod
    def of(cls, task_id: str) -> TurnEndedElsewhere:
        return cls(
            f"task {task_id} was ended by another node (this node was declared lost "
            "meanwhile); its turn stops"
        )


@dataclass(frozen=True)
class TurnRequest:
    session_id: str
    task_id: str
    approval_level: str
    attendance: Attendance = ATTENDED


@dataclass(frozen=True)
class TurnResult:
    text: str
    steps: int
    refused: bool = False
    """The text is the model's refusal."""


class _CallObserver:
    """Forwards a call's life events to the turn's event sink."""

    def __init__(self, events: TurnEvents) -> None:
        self._events = events

    def started(self, info: CallInfo) -> None:
        self._events.emit({"type": "tool_call_started", "tool_call": _info_dict(info)})

    def output(self, call_id: str, chunk: OutputChunk) -> None:
        self._events.emit(
            {
                "type": "tool_call_output",
                "tool_call_id": call_id,
                "seq": chunk.seq,
                "stream": chunk.stream,
                "text": chunk.text,
            }
        )

    def ended(self, info: CallInfo) -> None:
        self._events.emit({"type": "tool_call_ended", "tool_call": _info_dict(info)})


def _info_dict(info: CallInfo) -> dict[str, Any]:
    return dict(info.__dict__)


class Agent:
    """Runs turns: the model, tool calls through governance and the coordinator, and
    persistence of every message as it happens."""

    def __init__(
        self,
        chats: ChatRepository,
        deliveries: DeliveryRepository,
        providers: ProviderService,
        tools: ToolRegistry,
        coordinator: ToolCallCoordinator,
        gate: Gate,
        max_steps: int,
    ) -> None:
        self._chats = chats
        self._deliveries = deliveries
        self._providers = providers
        self._tools = tools
        self._coordinator = coordinator
        self._gate = gate
        self._max_steps = max_steps

    async def run_turn(self, req: TurnRequest, events: TurnEvents) -> TurnResult:
        model = await self._providers.active_model()
        stored = await self._chats.history(req.session_id)
        messages = [
            {"role": "system", "content": model_texts.SYSTEM_PROMPT},
            *repair(by_turn(stored, req.task_id)),
        ]
        specs = self._tools.openai_specs()
        for step in range(1, self._max_steps + 1):
            messages.extend(await self._take_deliveries(req, events))
            reply = await model.complete(
                messages,
                specs,
                lambda t: events.emit({"type": "text_delta", "text": t}),
                lambda t: events.emit({"type": "reasoning_delta", "text": t}),
            )
            # Only a reply the next request can carry is stored; anything else ends the
            # turn here and leaves the history as it was.
            check_reply(reply)
            reply = with_distinct_ids(reply, _call_ids(messages))
            call_ids = [new_call_id() for _ in reply.tool_calls]
            assistant = assistant_message(reply, call_ids)
            await self._persist(req, [("assistant", assistant)], events)
            messages.append(assistant)
            if not reply.tool_calls:
                return TurnResult(text=reply.text, steps=step, refused=reply.refused)
            results = await asyncio.gather(
                *(
                    self._call(req, call, call_id, events)
                    for call, call_id in zip(reply.tool_calls, call_ids, strict=True)
                )
            )
            await self._persist(req, [("tool", r) for r in results], events)
            messages.extend(results)
        raise StepLimitReached(
            f"the model was still calling tools after {self._max_steps} steps "
            f"(TETHER_MAX_STEPS); the turn was stopped"
        )

    async def _persist(
        self, req: TurnRequest, entries: list[tuple[str, dict[str, Any]]], events: TurnEvents
    ) -> None:
        if not await self._chats.append_to_turn(req.session_id, req.task_id, entries):
            raise TurnEndedElsewhere.of(req.task_id)
        for kind, payload in entries:
            events.emit({"type": "message", "kind": kind, "message": payload})

    async def _take_deliveries(self, req: TurnRequest, events: TurnEvents) -> list[dict[str, Any]]:
        """Results of background calls, as notification messages (a turn boundary)."""
        pending = await self._deliveries.pending(req.session_id)
        if not pending:
            return []
        notes = [
            {
                "role": "user",
                "content": model_texts.background_result(d.tool_call_id, d.content),
            }
            for d in pending
        ]
        await self._persist(req, [("notification", n) for n in notes], events)
        await self._deliveries.mark_delivered([d.id for d in pending])
        return notes

    async def _call(
        self, req: TurnRequest, call: RequestedCall, call_id: str, events: TurnEvents
    ) -> dict[str, Any]:
        """Run one requested call (``call_id`` is Tether's id for it); its tool message."""
        content = await self._run_checked(req, call, call_id, events)
        # The model's id answers the model's call; Tether's id names the call everywhere else.
        return {
            "role": "tool",
            "tool_call_id": call.id,
            "content": content,
            TETHER_CALL_ID: call_id,
        }

    async def _run_checked(
        self, req: TurnRequest, call: RequestedCall, call_id: str, events: TurnEvents
    ) -> str:
        try:
            arguments = _parse_arguments(call.arguments)
        except ToolInputError as exc:
            text = model_texts.not_run(str(exc))
            raw = {"unparsed": call.arguments[:_RAW_ARGUMENTS_KEPT]}
            inv = Invocation(call_id, req.session_id, req.task_id, AGENT_ID, call.name, raw)
            await self._gate.refused(inv, req.approval_level, "invalid-arguments", text)
            return text
        inv = Invocation(call_id, req.session_id, req.task_id, AGENT_ID, call.name, arguments)
        outcome = await run_tool_call(
            inv,
            self._tools,
            self._gate,
            self._coordinator,
            req.approval_level,
            events,
            _CallObserver(events),
            req.attendance,
        )
        return outcome.model_text


def _call_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {str(c.get("id")) for m in messages for c in m.get("tool_calls") or []}


def _parse_arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        raise ToolInputError(f"its arguments are not valid JSON ({exc.msg})") from exc
    if not isinstance(value, dict):
        raise ToolInputError("its arguments must be a JSON object")
    # An escaped unpaired surrogate in the arguments becomes one only here.
    return dict(valid_data(value))


__all__ = [
    "Agent",
    "ModelError",
    "StepLimitReached",
    "TurnEndedElsewhere",
    "TurnRequest",
    "TurnResult",
]
