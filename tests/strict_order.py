"""An independent check of a chat request, as strict as the strictest provider.

Written for the tests, apart from the product's own history code (which is what they
test): OpenAI's role order, plus the rules vLLM, SGLang and Anthropic-style gateways add
(string content, complete JSON arguments, ids unique in the whole request), plus
Tether's own promise that none of its ``x_`` keys leaves the server.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

_ASSISTANT_KEYS = {"role", "content", "tool_calls", "name", "refusal"}
_CALL_KEYS = {"id", "type", "function"}


def request_problems(
    messages: Sequence[Any],
    message_fields: Iterable[str] = (),
    call_fields: Iterable[str] = (),
    *,
    sent: bool = False,
) -> list[str]:
    """Everything a strict provider would refuse in ``messages`` (empty when valid).

    ``message_fields`` and ``call_fields`` are provider fields this provider accepts on
    assistant messages and their tool calls (``reasoning_content``, ``extra_content``).
    ``sent``: these are a request as sent, which must end on a user or tool message (a
    stored history may end on the assistant's answer; a request ending there asks for
    nothing, and strict providers refuse it).
    """
    problems: list[str] = []
    extra_message, extra_call = set(message_fields), set(call_fields)
    seen_ids: set[str] = set()
    open_ids: list[str] = []
    for i, msg in enumerate(messages):
        where = f"message {i}"
        if not isinstance(msg, dict):
            problems.append(f"{where} is not an object")
            continue
        role = msg.get("role")
        problems += [f"{where} carries {k!r}" for k in msg if str(k).startswith("x_")]
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if call_id in open_ids:
                open_ids.remove(call_id)
            else:
                problems.append(f"{where}: tool result {call_id!r} answers no open call")
            if not isinstance(msg.get("content"), str):
                problems.append(f"{where}: tool content is not a string")
            continue
        if open_ids:
            problems.append(f"{where} ({role}) comes before the results of {open_ids}")
            open_ids = []
        if role == "assistant":
            open_ids = _assistant_problems(
                msg, where, extra_message, extra_call, seen_ids, problems
            )
        elif role in ("system", "developer", "user"):
            if not isinstance(msg.get("content"), str | list):
                problems.append(f"{where}: {role} content is {msg.get('content')!r}")
        else:
            problems.append(f"{where}: unknown role {role!r}")
    if open_ids:
        problems.append(f"the request ends with unanswered calls {open_ids}")
    last = messages[-1] if messages else None
    if sent and not (isinstance(last, dict) and last.get("role") in ("user", "tool")):
        problems.append("the request does not end on a user or tool message")
    return problems


def _assistant_problems(
    msg: dict[str, Any],
    where: str,
    extra_message: set[str],
    extra_call: set[str],
    seen_ids: set[str],
    problems: list[str],
) -> list[str]:
    """Check one assistant message; returns its call ids (the results now owed)."""
    unknown = set(msg) - _ASSISTANT_KEYS - extra_message
    if unknown:
        problems.append(f"{where}: fields this provider does not take: {sorted(unknown)}")
    calls = msg.get("tool_calls")
    content = msg.get("content")
    if calls is not None and (not isinstance(calls, list) or not calls):
        problems.append(f"{where}: tool_calls is present but not a non-empty list")
        calls = []
    if not isinstance(content, str) and not (calls and content is None):
        problems.append(f"{where}: assistant content is {content!r} without tool calls")
    ids: list[str] = []
    for call in calls or []:
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"{where}: a tool call without an id")
            continue
        if call_id in seen_ids:
            problems.append(f"{where}: tool call id {call_id!r} is used twice")
        seen_ids.add(call_id)
        ids.append(call_id)
        problems += _call_problems(call, f"{where} call {call_id!r}", extra_call)
    return ids


def _call_problems(call: dict[str, Any], where: str, extra_call: set[str]) -> list[str]:
    problems = []
    unknown = set(call) - _CALL_KEYS - extra_call
    if unknown:
        problems.append(f"{where}: fields this provider does not take: {sorted(unknown)}")
    function = call.get("function")
    if call.get("type") != "function" or not isinstance(function, dict):
        return [*problems, f"{where}: not a function call"]
    if not isinstance(function.get("name"), str) or not function["name"]:
        problems.append(f"{where}: no function name")
    arguments = function.get("arguments")
    try:
        json.loads(arguments if isinstance(arguments, str) else "")
    except ValueError:
        problems.append(f"{where}: arguments {arguments!r} are not complete JSON")
    return problems
