"""Turning stored messages into a request the model will accept (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

INTERRUPTED = "[tether] No result: the server stopped before this call finished."


def model_message(payload: dict[str, Any]) -> dict[str, Any]:
    """The message as sent to the model: Tether's own ``x_`` keys removed."""
    return {k: v for k, v in payload.items() if not k.startswith("x_")}


def repair(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Make a history valid under strict role order.

    Every assistant tool call gets exactly one tool message right after its assistant
    message (a call a crash left without one gets a note saying so); tool messages that
    answer nothing are dropped.
    """
    out: list[dict[str, Any]] = []
    open_ids: list[str] = []
    answered: dict[str, dict[str, Any]] = {}

    def close_open() -> None:
        for call_id in open_ids:
            out.append(answered.get(call_id) or _note(call_id))
        open_ids.clear()
        answered.clear()

    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            if msg.get("tool_call_id") in open_ids:
                answered[msg["tool_call_id"]] = msg
            continue
        close_open()
        out.append(msg)
        if role == "assistant":
            open_ids.extend(tc["id"] for tc in msg.get("tool_calls") or [])
    close_open()
    return out


def _note(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED}
