"""What a model answers, and the rule for when that answer may enter a history (pure)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from tether import nesting
from tether.errors import TetherError

#: The longest tool name (MCP allows 128; the store's columns hold that many).
MAX_TOOL_NAME = 128
#: The longest model call id kept (providers' own are 9 to 40 characters).
MAX_CALL_ID = 256
#: The deepest a call's arguments may nest lists and objects: far past any tool's schema.
#: Arguments a few hundred deep parse, then fail whatever walks them again (the turn
#: ended on an internal error); past about a thousand, parsing them fails so.
MAX_ARGUMENTS_DEPTH = 64
#: The most tool calls one reply may ask for: far past the dozens a model asks for at
#: once, it bounds what a provider that opens call after call (each a few bytes, which
#: the reply's character cap hardly counts) can make the server hold and then run.
MAX_CALLS_PER_REPLY = 1000
#: Finish reasons that say the provider stopped writing before the model had finished,
#: whatever the reply holds so far, and what each means. Each comes with an HTTP 200 and
#: often ``[DONE]``, so the stream ends as if the reply were whole.
CUT_SHORT = {
    "abort": "it aborted the request (vLLM)",
    "error": "an error while the model wrote (OpenRouter)",
    "insufficient_system_resource": "it ran short of resources (DeepSeek)",
}


class ModelError(TetherError):
    """The provider failed or returned something unusable; the message says what."""


class IncompleteReply(ModelError):
    """The reply cannot be stored: the next request built on it would be refused."""


@dataclass(frozen=True)
class RequestedCall:
    """One tool call in the model's reply.

    ``id`` is the model's own id for the call (unique within the request), used only in
    the messages sent back to the model; Tether gives every call an id of its own.
    """

    id: str
    name: str
    arguments: str
    echo: dict[str, Any] = field(default_factory=dict)
    """Provider fields of this call to send back verbatim (e.g. Gemini's ``extra_content``)."""


@dataclass(frozen=True)
class AssistantReply:
    """A whole model reply: its text, reasoning and tool calls."""

    text: str
    tool_calls: list[RequestedCall] = field(default_factory=list)
    reasoning: str = ""
    echo: dict[str, Any] = field(default_factory=dict)
    """What the provider needs back with this message (stored opaque; see ``llm.wire``)."""
    refused: bool = False
    """The text is the model's refusal (OpenAI's ``refusal`` field), not an answer."""


def arguments_problem(arguments: str) -> tuple[str, bool] | None:
    """Why ``arguments`` cannot be sent back to a provider, and whether they are cut
    short (more of them might have made them valid); None when they are complete JSON
    nested at most MAX_ARGUMENTS_DEPTH deep."""
    try:
        value = json.loads(arguments)
    except ValueError as exc:
        return f"its arguments are not complete JSON ({exc})", True
    except RecursionError:
        value = None
    else:
        # Each level opens a bracket: most arguments have too few to be walked at all.
        brackets = arguments.count("[") + arguments.count("{")
        if brackets <= MAX_ARGUMENTS_DEPTH or (
            nesting.depth(value, MAX_ARGUMENTS_DEPTH) <= MAX_ARGUMENTS_DEPTH
        ):
            return None
    return f"its arguments nest lists and objects more than {MAX_ARGUMENTS_DEPTH} deep", False


def check_reply(reply: AssistantReply, finish_reason: str | None = "stop") -> None:
    """Raise IncompleteReply when ``reply`` would make the next request invalid.

    ``finish_reason`` (None when the stream just ended) only chooses the wording: a
    reply cut short reads differently from one the model wrote wrong.
    """
    if finish_reason in CUT_SHORT:
        raise IncompleteReply(
            f"the model provider stopped the reply before the model had finished "
            f"(finish reason {finish_reason!r}: {CUT_SHORT[finish_reason]}); nothing of it "
            "was kept"
        )
    if finish_reason == "content_filter" and (reply.text.strip() or reply.tool_calls):
        # Azure (and gateways that map Gemini's SAFETY so) stop a reply the filter flags
        # where it is and end the stream as if whole: what came before is the start of an
        # answer, not all of it.
        raise IncompleteReply(
            "the provider's content filter cut the model's reply short (finish reason "
            "'content_filter'); the text shown so far is not kept, and no tool call was run"
        )
    for call in reply.tool_calls:
        if not call.name:
            raise IncompleteReply("the model sent a tool call without a function name")
        if len(call.name) > MAX_TOOL_NAME or not call.name.isprintable():
            shown = ascii(call.name[:40]) + ("..." if len(call.name) > 40 else "")
            raise IncompleteReply(
                f"the model sent a tool call named {shown}, which no tool can be "
                f"(at most {MAX_TOOL_NAME} printable characters); nothing was run"
            )
        found = arguments_problem(call.arguments)
        if found is None:
            continue
        problem, cut_short = found
        if cut_short and finish_reason is None:
            raise IncompleteReply(
                "the provider's stream ended in the middle of a tool call's arguments "
                f"({call.name}); nothing was run"
            )
        if cut_short and finish_reason == "length":
            raise IncompleteReply(
                "the reply reached the provider's token limit in the middle of a tool call's "
                f"arguments ({call.name}); nothing was run"
            )
        raise IncompleteReply(
            f"the model sent a malformed tool call ({call.name}: {problem}); nothing was run"
        )
    if not reply.tool_calls and not reply.text.strip():
        _check_empty(reply, finish_reason)


def _check_empty(reply: AssistantReply, finish_reason: str | None) -> None:
    """An empty answer the provider's finish reason explains is told as such, not taken
    for an answer (a model that ends with nothing to say finishes with ``stop``)."""
    if finish_reason == "content_filter":
        raise IncompleteReply("the provider's content filter withheld the model's reply")
    if finish_reason == "length":
        used = " (its reasoning used it all)" if reply.reasoning.strip() else ""
        raise IncompleteReply(
            f"the reply reached the provider's token limit before any answer{used}"
        )
    if finish_reason is None:
        raise IncompleteReply(
            "the provider's stream ended without an answer (no text, no tool call, no finish "
            "reason)"
        )


def distinct_id(call_id: str, used: set[str]) -> str:
    """``call_id``, or ``call_id_2``, ``_3``... when it is in ``used``; the result is added."""
    candidate, n = call_id, 1
    while candidate in used:
        n += 1
        candidate = f"{call_id}_{n}"
    used.add(candidate)
    return candidate


def with_distinct_ids(reply: AssistantReply, taken: Iterable[str]) -> AssistantReply:
    """``reply`` with call ids unique among themselves and against ``taken``.

    A provider may reuse an id within a reply or across turns; strict providers refuse a
    request that holds one twice. The results answer the ids as renamed here.
    """
    used = set(taken)
    calls = [replace(c, id=distinct_id(c.id or "call", used)) for c in reply.tool_calls]
    return replace(reply, tool_calls=calls)
