"""Assembling a streamed chat completion into one reply, in every dialect seen (pure).

Providers disagree on how tool calls stream. OpenAI gives each call a distinct
``index`` and sends its id and name once; others send no index, or index 0 for every
call (Ollama), repeat the name in every chunk (MiniMax, Kimi through some gateways), or
reuse an id within one reply. A delta therefore joins the call its index names, else the
call its id names, else the call in progress, unless it plainly starts a new call: a
different id or name, or more arguments after arguments that are already complete JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tether.llm.capabilities import Capabilities
from tether.llm.errors import describe_error
from tether.llm.reply import (
    MAX_CALL_ID,
    MAX_CALLS_PER_REPLY,
    AssistantReply,
    IncompleteReply,
    ModelError,
    RequestedCall,
    check_reply,
    with_distinct_ids,
)
from tether.llm.sse import Event, events_in
from tether.text import valid_text

#: The most characters one reply may hold, text, reasoning and tool calls together:
#: far past what a model writes in a reply (128k tokens are about half a million), it
#: bounds what a provider that never stops sending can make the server hold.
MAX_REPLY_CHARS = 16_000_000


@dataclass(frozen=True)
class Deltas:
    """The text and reasoning one chunk added, to show as they arrive."""

    text: str = ""
    reasoning: str = ""


# What moves a scan of JSON text: outside strings, and inside them.
_STRUCTURE = re.compile(r'["\[\]{}]')
_STRING_STOP = re.compile(r'["\\]')


@dataclass
class _Partial:
    index: int | None
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    echo: dict[str, Any] = field(default_factory=dict)
    # The arguments scanned as they arrive: a parse is tried only where the top-level
    # value has just closed. Tried on every chunk, a long call whose name came again in
    # each chunk (MiniMax) was parsed whole per chunk ending in "}": quadratic, and a few
    # MB of them held the event loop for minutes.
    _depth: int = 0
    _in_string: bool = False
    _escaped: bool = False
    _closed: bool = False  # a top-level object or array has closed
    _complete: bool | None = None  # None: not parsed since it closed

    @property
    def arguments(self) -> str:
        return "".join(self.pieces)

    def add(self, piece: str) -> None:
        self.pieces.append(piece)
        if self._closed:
            # After a whole value only whitespace may follow; anything else spoils it.
            if piece.strip():
                self._complete = False
            return
        at, end = 0, len(piece)
        if self._escaped and end:
            self._escaped, at = False, 1
        while at < end:
            if self._in_string:
                stop = _STRING_STOP.search(piece, at)
                if stop is None:
                    return
                at = stop.end()
                if stop.group() == '"':
                    self._in_string = False
                elif at == end:
                    self._escaped = True
                else:
                    at += 1
                continue
            mark = _STRUCTURE.search(piece, at)
            if mark is None:
                return
            at = mark.end()
            if mark.group() == '"':
                self._in_string = True
            elif mark.group() in "[{":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    self._closed = True
                    if piece[at:].strip():
                        self._complete = False
                    return

    def has_complete_arguments(self) -> bool:
        if not self._closed or self._complete is False:
            return False
        if self._complete is None:
            try:
                json.loads(self.arguments)
            except (ValueError, RecursionError):
                self._complete = False
            else:
                self._complete = True
        return self._complete


class StreamAssembler:
    """Feed it each chunk (as a dict, unknown fields and all); ``finish`` gives the reply."""

    def __init__(self, caps: Capabilities) -> None:
        self._caps = caps
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self.reasoning_field: str | None = None
        self.finish_reason: str | None = None
        self.refused = False
        """Whether the model wrote a refusal (OpenAI's ``refusal`` field) rather than content."""
        self._calls: list[_Partial] = []
        self._by_index: dict[int, _Partial] = {}
        self._by_id: dict[str, _Partial] = {}
        self.started = False
        """Whether any chunk arrived (a failure after that broke a reply under way)."""
        self._size = 0

    def feed(self, chunk: Mapping[str, Any]) -> Deltas:
        """Take one chunk; returns the text and reasoning it added."""
        self.started = True
        error = chunk.get("error")
        if error:
            raise reported_error(error)
        text: list[str] = []
        reasoning: list[str] = []
        for choice in chunk.get("choices") or []:
            # n > 1 is never asked for; a stray second choice must not mix into the first.
            if not isinstance(choice, Mapping) or choice.get("index") not in (0, None):
                continue
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
            delta = choice.get("delta")
            if isinstance(delta, Mapping):  # Azure's content filter sends choices without one
                self._take_delta(delta, text, reasoning)
        if self._size > MAX_REPLY_CHARS:
            raise ModelError(
                f"the model's reply passed {MAX_REPLY_CHARS:,} characters (text, reasoning "
                "and tool calls together) and was cut off there"
            )
        return Deltas("".join(text), "".join(reasoning))

    def _take_delta(self, delta: Mapping[str, Any], text: list[str], reasoning: list[str]) -> None:
        said, thought = _content_text(delta.get("content"))
        self._size += len(said) + len(thought)
        if said:
            self._text.append(said)
            text.append(said)
        if thought:
            self._reasoning.append(thought)
            reasoning.append(thought)
        refusal = _text(delta.get("refusal"))
        if refusal:
            # OpenAI words a refusal in ``refusal`` and leaves ``content`` null: it is the
            # answer the person reads (it read as an empty reply), marked as a refusal.
            self.refused = True
            self._size += len(refusal)
            self._text.append(refusal)
            text.append(refusal)
        for name in self._caps.reasoning_fields:
            piece = delta.get(name)
            if isinstance(piece, str) and piece:
                self.reasoning_field = self.reasoning_field or name
                self._size += len(piece)
                self._reasoning.append(piece)
                reasoning.append(piece)
                break
        for call_delta in delta.get("tool_calls") or []:
            if isinstance(call_delta, Mapping):
                self._take_call_delta(call_delta)

    def _take_call_delta(self, d: Mapping[str, Any]) -> None:
        function = d.get("function")
        if not isinstance(function, Mapping):
            function = {}
        name = _text(function.get("name"))
        pieces = _arguments_text(function.get("arguments"))
        call_id = _text(d.get("id"))
        index = d.get("index") if isinstance(d.get("index"), int) else None
        call = self._owner(index, call_id, name)
        if call is None or _starts_new_call(call, call_id, name, pieces):
            call = self._open(index, call_id)
        if call_id and not call.id:
            call.id = call_id
            self._size += len(call_id)
            self._by_id.setdefault(call_id, call)
        if name and not call.name:  # a name sent again is the same name, never a suffix
            call.name = name
            self._size += len(name)
        if pieces:
            self._size += len(pieces)
            call.add(pieces)
        for key in self._caps.call_echo_fields:
            if key in d:
                call.echo[key] = _merged(call.echo.get(key), d[key])

    def _owner(self, index: int | None, call_id: str, name: str) -> _Partial | None:
        if index is not None:
            return self._by_index.get(index)
        last = self._calls[-1] if self._calls else None
        if call_id:
            known = self._by_id.get(call_id)
            # Without an index, an id may first come with a later chunk of its call.
            if known is None and name == "" and last is not None and not last.id:
                return last
            return known
        return last

    def _open(self, index: int | None, call_id: str) -> _Partial:
        if len(self._calls) == MAX_CALLS_PER_REPLY:
            raise IncompleteReply(
                f"the model's reply asked for more than {MAX_CALLS_PER_REPLY:,} tool calls "
                "at once; none was run"
            )
        call = _Partial(index)
        self._calls.append(call)
        if index is not None:
            self._by_index[index] = call
        if call_id:
            self._by_id[call_id] = call
        return call

    def finish(self) -> AssistantReply:
        """The whole reply, or IncompleteReply when it cannot enter a history.

        Call ids are made unique (a repeated one gets a suffix, a missing one is made up).
        """
        if not self.started:
            # A body that is neither an event stream nor JSON (an HTML page) reads as no
            # events at all.
            raise IncompleteReply("the model provider's reply held no streamed completion")
        reply = with_distinct_ids(self._assemble(), ())
        check_reply(reply, self.finish_reason)
        return reply

    def _assemble(self) -> AssistantReply:
        calls = [
            RequestedCall(
                # The model's id goes back to the model with the call's result: made
                # valid text of a sane length (a lone surrogate failed the next request).
                id=valid_text(call.id)[:MAX_CALL_ID] or f"call_{position}",
                name=valid_text(call.name),
                arguments=valid_text(call.arguments) if call.arguments.strip() else "{}",
                echo=dict(call.echo),
            )
            for position, call in enumerate(self._calls)
        ]
        reasoning = valid_text("".join(self._reasoning))
        return AssistantReply(
            text=valid_text("".join(self._text)),
            tool_calls=calls,
            reasoning=reasoning,
            echo={"reasoning_field": self.reasoning_field} if self.reasoning_field else {},
            refused=self.refused,
        )


def whole_body_chunks(body: bytes) -> list[Any]:
    """The chunks a reply that came as one JSON body stands for: a chat completion (a
    gateway that ignored ``stream``) as one chunk whose delta is its message; an error
    object as itself (:meth:`StreamAssembler.feed` raises it in the provider's words); an
    event stream labelled JSON, its events. json.JSONDecodeError if it is none of them."""
    text = body.decode("utf-8", "replace")
    if text.lstrip().startswith(("data:", "event:", ":")):
        chunks: list[Any] = []
        for event in events_in(body):
            if event.is_done:
                break
            chunks.append(event_chunk(event))
        return chunks
    value = json.loads(text)
    if not isinstance(value, Mapping) or not isinstance(value.get("choices"), list):
        return [value]
    choices = []
    for choice in value["choices"]:
        if not isinstance(choice, Mapping):
            continue
        delta = choice.get("message")
        if isinstance(delta, Mapping) and isinstance(delta.get("tool_calls"), list):
            # A message's calls carry no index: their place in the list is it.
            calls = [
                {**c, "index": i} if isinstance(c, Mapping) else c
                for i, c in enumerate(delta["tool_calls"])
            ]
            delta = {**delta, "tool_calls": calls}
        choices.append({**choice, "delta": delta})
    return [{**value, "choices": choices}]


def event_chunk(event: Event) -> Any:
    """The chunk an event carries (json.JSONDecodeError if it is not JSON). An ``error``
    event raises ModelError in the provider's words, whatever its data's shape: read as
    a chunk, one without an ``error`` key ended the reply as if it were whole."""
    if event.type != "error":
        return json.loads(event.data)
    try:
        body = json.loads(event.data)
    except ValueError:
        body = event.data
    raise reported_error(body)


def not_a_chunk(value: Any) -> ModelError:
    """What a stream line that is JSON but no object stands for: an error in the
    provider's words when it holds one (Gemini reports errors as a list of objects)."""
    if describe_error(value):
        return reported_error(value)
    return ModelError("the model provider sent a stream line that is not a JSON object")


def reported_error(body: Any) -> ModelError:
    """An error the provider reported in its stream, in its own words; when it gave no
    message, its body as sent (both bounded, anything shaped like a credential masked)."""
    said = describe_error(body)
    if not said:
        shown = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        said = describe_error(shown) or "no details given"
    return ModelError(f"the model provider reported an error: {said}")


def _starts_new_call(call: _Partial, call_id: str, name: str, pieces: str) -> bool:
    if not (call_id or name):
        return False  # a new call always comes with its name or id
    other_id = bool(call_id and call.id and call_id != call.id)
    other_name = bool(name and call.name and name != call.name)
    if call.has_complete_arguments():
        return other_id or other_name or bool(pieces.strip())
    if not call.pieces:
        return other_name
    # Mid-arguments, only a new id that comes with a name starts another call (some
    # gateways send a fresh id on every chunk of the same call).
    return other_id and bool(name)


def _content_text(content: Any) -> tuple[str, str]:
    """(text, reasoning) of a delta's content: a string, or a list of parts as Mistral's
    reasoning models send it (``{"type": "text"}`` and ``{"type": "thinking"}`` parts)."""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        return "", ""
    said, thought = [], []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text":
            said.append(_text(part.get("text")))
        elif part.get("type") == "thinking":
            thought.append(_content_text(part.get("thinking"))[0])
    return "".join(said), "".join(thought)


def _arguments_text(value: Any) -> str:
    """A call's arguments as text: OpenAI sends a JSON string; llama.cpp's server and
    Hugging Face's TGI have sent the object itself, which was read as no arguments."""
    if isinstance(value, Mapping | list):
        return json.dumps(value, ensure_ascii=False)
    return _text(value)


def _merged(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **new}
    return new


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
