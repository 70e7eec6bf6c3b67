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


def order_problems(messages: Iterable[dict[str, Any]]) -> list[str]:
    """Why a request would break strict role order (empty when it is valid).

    The rules OpenAI enforces: each assistant tool call is answered by exactly one tool
    message, and those answers come right after that assistant message, before anything
    else; a tool message answers a call of the assistant message just before its block.
    """
    problems: list[str] = []
    open_ids: set[str] = set()
    for index, msg in enumerate(messages):
        role = msg.get("role")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if call_id not in open_ids:
                problems.append(f"message {index}: tool result {call_id!r} answers no open call")
            open_ids.discard(call_id)
            continue
        if open_ids:
            problems.append(f"message {index} ({role}) comes before results for {sorted(open_ids)}")
            open_ids = set()
        if role == "assistant":
            ids = [tc["id"] for tc in msg.get("tool_calls") or []]
            if len(set(ids)) != len(ids):
                problems.append(f"message {index}: repeated tool call ids {ids}")
            open_ids = set(ids)
    if open_ids:
        problems.append(f"the request ends with unanswered calls {sorted(open_ids)}")
    return problems


def _note(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED}
