"""Stored assistant messages and the messages sent to a provider (pure).

A stored message is the OpenAI message plus Tether's own ``x_`` keys: ``x_reasoning``
(the reasoning text, shown folded in the console), ``x_refusal`` (true when the content
is the model's refusal, which OpenAI sends in a field of its own), ``x_echo`` (what the
provider needs back and which provider that is) and, on each tool call,
``x_tether_call_id`` (Tether's id for the call) and ``x_echo`` (the call's own provider
fields). Before a request the ``x_`` keys are removed, and what the provider needs back
is restored, only when the request goes to the provider that wrote the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.llm.capabilities import Capabilities
from tether.llm.reply import AssistantReply

REASONING = "x_reasoning"
ECHO = "x_echo"
REFUSAL = "x_refusal"
TETHER_CALL_ID = "x_tether_call_id"


def assistant_message(reply: AssistantReply, tether_ids: Sequence[str]) -> dict[str, Any]:
    """The message to store for ``reply``; ``tether_ids`` are Tether's ids for its calls."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        # OpenAI's own form for a tool-call message with no text.
        message["content"] = reply.text or None
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
                TETHER_CALL_ID: tether_id,
                **({ECHO: call.echo} if call.echo else {}),
            }
            for call, tether_id in zip(reply.tool_calls, tether_ids, strict=True)
        ]
    if reply.reasoning:
        message[REASONING] = reply.reasoning
    if reply.refused:
        # Sent back as content: every provider takes that, and the model reads what it said.
        message[REFUSAL] = True
    if reply.echo:
        message[ECHO] = reply.echo
    return message


def request_messages(
    messages: Sequence[dict[str, Any]], origin: str, caps: Capabilities
) -> list[dict[str, Any]]:
    """Stored ``messages`` as sent to the provider identified by ``origin``."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [
        to_wire(
            m, origin, caps, with_reasoning=caps.reasoning_echo_scope == "history" or i > last_user
        )
        for i, m in enumerate(messages)
    ]


def to_wire(
    message: dict[str, Any], origin: str, caps: Capabilities, with_reasoning: bool = True
) -> dict[str, Any]:
    """``message`` as sent to the provider identified by ``origin``."""
    out = _public(message)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [_public(call) for call in calls]
    echo = message.get(ECHO)
    if not isinstance(echo, dict) or echo.get("origin") != origin:
        return out
    field = caps.reasoning_echo_field or echo.get("reasoning_field")
    if with_reasoning and caps.echo_reasoning and field and message.get(REASONING):
        out[field] = message[REASONING]
    for stored, sent in zip(calls or [], out.get("tool_calls") or [], strict=True):
        call_echo = stored.get(ECHO) if isinstance(stored, dict) else None
        if isinstance(call_echo, dict):
            sent.update({k: v for k, v in call_echo.items() if k in caps.call_echo_fields})
    return out


def _public(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        return {}
    return {k: v for k, v in item.items() if not str(k).startswith("x_")}
