"""Taking up a turn a restart interrupted: answer the calls its last assistant message
asked for, right after that message, so the history stays in strict role order (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tether.llm.wire import TETHER_CALL_ID
from tether.model_texts import INTERRUPTED, NOT_STARTED
from tether.store.records import ToolCallRecord


def open_calls(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str | None]]:
    """(model id, Tether id) of the calls the task's last assistant message asked for
    that no tool message after it answers (empty if the task's messages end otherwise).
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant":
            answered = {m.get("tool_call_id") for m in messages[index + 1 :]}
            return [
                (tc["id"], tc.get(TETHER_CALL_ID))
                for tc in message.get("tool_calls") or []
                if tc["id"] not in answered
            ]
        if message.get("role") != "tool":
            return []
    return []


def answers(
    asked: Sequence[tuple[str, str | None]],
    records: Sequence[ToolCallRecord],
    outcomes: Mapping[str, str],
) -> list[dict[str, Any]]:
    """A tool message for each asked call: the outcome of an adopted call, the stored
    result of one that ended before the restart, or a note saying why there is none."""
    out = []
    for model_id, tether_id in asked:
        record = _record_for(model_id, tether_id, records)
        if record is None:
            content = NOT_STARTED
        else:
            content = outcomes.get(record.id) or record.result or INTERRUPTED
        message: dict[str, Any] = {"role": "tool", "tool_call_id": model_id, "content": content}
        if record is not None:
            message[TETHER_CALL_ID] = record.id
        out.append(message)
    return out


def _record_for(
    model_id: str, tether_id: str | None, records: Sequence[ToolCallRecord]
) -> ToolCallRecord | None:
    if tether_id is not None:
        return next((r for r in records if r.id == tether_id), None)
    # Older messages lack Tether's id: a repeated model id was made "<id>~<n>".
    matching = [r for r in records if r.id == model_id or r.id.startswith(f"{model_id}~")]
    return max(matching, key=lambda r: r.started_at) if matching else None
