"""Taking up a turn a restart interrupted: answer the calls its last assistant message
asked for, right after that message, so the history stays in strict role order (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tether.agent.history import INTERRUPTED
from tether.store.records import ToolCallRecord

NOT_STARTED = "[tether] The call was not run: the server restarted before it started."


def open_calls(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Ids of the calls the task's last assistant message asked for that no tool
    message after it answers (empty if the task's messages end otherwise)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant":
            asked = [tc["id"] for tc in message.get("tool_calls") or []]
            answered = {m.get("tool_call_id") for m in messages[index + 1 :]}
            return [a for a in asked if a not in answered]
        if message.get("role") != "tool":
            return []
    return []


def answers(
    asked: Sequence[str], records: Sequence[ToolCallRecord], outcomes: Mapping[str, str]
) -> list[dict[str, Any]]:
    """A tool message for each asked call: the outcome of an adopted call, the stored
    result of one that ended before the restart, or a note saying why there is none."""
    out = []
    for model_id in asked:
        record = _record_for(model_id, records)
        if record is None:
            content = NOT_STARTED
        else:
            content = outcomes.get(record.id) or record.result or INTERRUPTED
        message: dict[str, Any] = {"role": "tool", "tool_call_id": model_id, "content": content}
        if record is not None:
            message["x_tether_call_id"] = record.id
        out.append(message)
    return out


def _record_for(model_id: str, records: Sequence[ToolCallRecord]) -> ToolCallRecord | None:
    # The coordinator makes a repeated model id unique as "<id>~<n>": the latest wins.
    matching = [r for r in records if r.id == model_id or r.id.startswith(f"{model_id}~")]
    return max(matching, key=lambda r: r.started_at) if matching else None
