"""Turning stored messages into a history every provider accepts (pure)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tether.llm.reply import distinct_id
from tether.model_texts import INTERRUPTED
from tether.store.records import MessageRecord

UNREADABLE_ARGUMENTS = "{}"


def by_turn(stored: Iterable[MessageRecord], current: str | None = None) -> list[dict[str, Any]]:
    """The stored messages' payloads, each turn's together: turns in the order they
    began (their first message), the ``current`` one last, a turn's messages in the order
    stored. A message sent while another turn ran is stored at once (a crash must not
    lose it), so it lies among that turn's messages; to the model it comes after that
    turn's last one, or the request would end on the old turn's answer, the new question
    seemingly answered. A message of no turn (a scheduled text) is a turn of its own."""
    turns: dict[object, list[dict[str, Any]]] = {}
    for record in stored:
        key: object = record.task_id if record.task_id is not None else object()
        turns.setdefault(key, []).append(record.payload)
    last = turns.pop(current, []) if current is not None else []
    return [payload for turn in (*turns.values(), last) for payload in turn]


def repair(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Make a history valid under strict role order, mending what older versions stored.

    Every assistant tool call gets exactly one tool message right after its assistant
    message (a call a crash left without one gets a note saying so); tool messages that
    answer nothing are dropped. A user message stored while calls were still running (a
    message sent during another turn's calls is saved at once, before their results)
    moves after their results, which it would otherwise have cut off. Assistant messages
    are mended too: a ``null`` content without tool calls becomes ``""``, arguments that
    are not complete JSON become ``{}``, and a call id seen before in the history gets a
    new one, its results following it in order.
    """
    out: list[dict[str, Any]] = []
    used_ids: set[str] = set()
    waiting: dict[str, list[str]] = {}  # stored id -> ids (as mended) still unanswered
    block: list[str] = []  # the open assistant message's call ids, in order
    answers: dict[str, dict[str, Any]] = {}
    held: list[dict[str, Any]] = []  # messages that came while the block was open

    def close_block() -> None:
        out.extend(answers.get(call_id) or _note(call_id) for call_id in block)
        out.extend(held)
        block.clear()
        answers.clear()
        waiting.clear()
        held.clear()

    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            queue = waiting.get(str(msg.get("tool_call_id")))
            if queue:
                call_id = queue.pop(0)
                answers[call_id] = {**msg, "tool_call_id": call_id}
            continue
        if role != "assistant" and len(answers) < len(block):
            held.append(msg)
            continue
        close_block()
        if role == "assistant":
            msg = _mend_assistant(msg, used_ids, waiting, block)
        out.append(msg)
    close_block()
    return out


def _mend_assistant(
    msg: dict[str, Any], used_ids: set[str], waiting: dict[str, list[str]], block: list[str]
) -> dict[str, Any]:
    calls = [c for c in msg.get("tool_calls") or [] if isinstance(c, dict)]
    mended = {k: v for k, v in msg.items() if k != "tool_calls"}
    if not calls:
        # A tool-call list that is empty is refused, and so is a null content without one.
        if mended.get("content") is None:
            mended["content"] = ""
        return mended
    mended["tool_calls"] = []
    for call in calls:
        stored_id = str(call.get("id") or "call")
        call_id = distinct_id(stored_id, used_ids)
        waiting.setdefault(stored_id, []).append(call_id)
        block.append(call_id)
        mended["tool_calls"].append({**call, "id": call_id, "function": _mend_function(call)})
    return mended


def _mend_function(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    function = dict(function) if isinstance(function, dict) else {}
    arguments = function.get("arguments")
    try:
        json.loads(arguments if isinstance(arguments, str) else "")
    except (ValueError, RecursionError):
        function["arguments"] = UNREADABLE_ARGUMENTS
    return function


def _note(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED}
