"""Stream assembly, dialect by dialect: chunks as providers send them (as parsed JSON)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether.llm.capabilities import DEFAULT
from tether.llm.reply import AssistantReply, IncompleteReply, ModelError
from tether.llm.stream import MAX_REPLY_CHARS, StreamAssembler, whole_body_chunks

SHELL = "execute_shell_command"
TIME = "get_current_time"


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if delta is not None:
        choice["delta"] = delta
    return {"id": "c", "object": "chat.completion.chunk", "choices": [choice], **extra}


def call(
    index: int | None = None,
    id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    delta: dict[str, Any] = {**extra}
    if index is not None:
        delta["index"] = index
    if id is not None:
        delta["id"] = id
    function = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}
    if function:
        delta["function"] = function
    return chunk({"tool_calls": [delta]})


def assemble(*chunks: dict[str, Any]) -> AssistantReply:
    assembler = StreamAssembler(DEFAULT)
    for c in chunks:
        assembler.feed(c)
    return assembler.finish()


def named(reply: AssistantReply) -> list[tuple[str, str, dict[str, Any]]]:
    return [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls]


LS = json.dumps({"command": "ls"})
PWD = json.dumps({"command": "pwd"})


def test_text_arrives_piece_by_piece_and_is_reported_as_it_comes() -> None:
    assembler = StreamAssembler(DEFAULT)
    added = [assembler.feed(chunk({"content": p})).text for p in ("Hel", "lo", "")]
    assembler.feed(chunk({}, "stop"))
    assert added == ["Hel", "lo", ""]
    assert assembler.finish() == AssistantReply(text="Hello")


def test_distinct_indexes_interleaved() -> None:
    reply = assemble(
        call(0, "a", SHELL, ""),
        call(1, "b", SHELL, ""),
        call(0, arguments=LS[:5]),
        call(1, arguments=PWD[:7]),
        call(0, arguments=LS[5:]),
        call(1, arguments=PWD[7:]),
        chunk({}, "tool_calls"),
    )
    assert named(reply) == [("a", SHELL, {"command": "ls"}), ("b", SHELL, {"command": "pwd"})]


def test_no_index_but_ids() -> None:
    reply = assemble(
        call(id="a", name=TIME, arguments="{}"),
        call(id="b", name=SHELL, arguments=LS[:4]),
        call(id="b", arguments=LS[4:]),
        chunk({}, "tool_calls"),
    )
    assert named(reply) == [("a", TIME, {}), ("b", SHELL, {"command": "ls"})]


def test_no_index_and_the_id_only_in_a_later_chunk() -> None:
    # The id arriving after the name opened a second call, nameless: the turn failed.
    reply = assemble(
        call(name=SHELL, arguments=LS[:5]),
        call(id="late", arguments=LS[5:]),
        call(id="late", arguments=""),
        call(id="b", name=SHELL, arguments=PWD),
        chunk({}, "tool_calls"),
    )
    assert named(reply) == [("late", SHELL, {"command": "ls"}), ("b", SHELL, {"command": "pwd"})]


def test_no_index_no_id_splits_on_a_new_name_after_complete_arguments() -> None:
    reply = assemble(
        call(name=TIME, arguments="{}"),
        call(name=SHELL, arguments=""),
        call(arguments=LS[:3]),
        call(arguments=LS[3:]),
        chunk({}, "stop"),
    )
    assert named(reply) == [("call_0", TIME, {}), ("call_1", SHELL, {"command": "ls"})]


def test_no_index_no_id_splits_on_new_arguments_after_complete_ones() -> None:
    reply = assemble(call(name=SHELL, arguments=LS), call(name=SHELL, arguments=PWD))
    assert [c.name for c in reply.tool_calls] == [SHELL, SHELL]
    assert [json.loads(c.arguments) for c in reply.tool_calls] == [
        {"command": "ls"},
        {"command": "pwd"},
    ]


def test_every_call_at_index_zero_as_ollama_sends_them() -> None:
    reply = assemble(
        call(0, "call_x1", TIME, "{}"),
        call(0, "call_x2", SHELL, LS),
        chunk({}, "tool_calls"),
    )
    assert named(reply) == [("call_x1", TIME, {}), ("call_x2", SHELL, {"command": "ls"})]


def test_every_call_at_index_zero_without_ids() -> None:
    reply = assemble(call(0, name=TIME, arguments="{}"), call(0, name=SHELL, arguments=LS))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [(TIME, "{}"), (SHELL, LS)]


def test_index_zero_with_a_fresh_id_on_every_chunk_stays_one_call() -> None:
    reply = assemble(
        call(0, "id1", SHELL, LS[:4]),
        call(0, "id2", arguments=LS[4:8]),
        call(0, "id3", arguments=LS[8:]),
    )
    assert named(reply) == [("id1", SHELL, {"command": "ls"})]


def test_a_name_repeated_in_every_chunk_is_one_name() -> None:
    pieces = [LS[i : i + 3] for i in range(0, len(LS), 3)]
    reply = assemble(
        *(call(0, "a", SHELL, p) for p in pieces),
        call(0, "a", SHELL, ""),
        chunk({}, "tool_calls"),
    )
    assert named(reply) == [("a", SHELL, {"command": "ls"})]


def test_a_long_call_with_its_name_in_every_chunk_is_parsed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Code written through a tool ends many chunks in "}": each such chunk parsed the
    # whole arguments so far (quadratic: a few MB held the event loop for minutes).
    parses = 0
    real_loads = json.loads

    def counted(text: str) -> Any:
        nonlocal parses
        parses += 1
        return real_loads(text)

    monkeypatch.setattr("tether.llm.stream.json.loads", counted)
    code = "int main() { return 0; }\n" * 2000
    arguments = json.dumps({"path": "a.c", "content": code})
    pieces = [arguments[i : i + 25] for i in range(0, len(arguments), 25)]
    assert sum(p.endswith("}") for p in pieces) > 50
    reply = assemble(*(call(0, "a", "write_file", p) for p in pieces), chunk({}, "tool_calls"))
    assert parses <= 1
    assert named(reply) == [("a", "write_file", {"path": "a.c", "content": code})]
    assert reply.tool_calls[0].arguments == arguments


def test_a_name_repeated_without_index_or_id() -> None:
    reply = assemble(*(call(name=SHELL, arguments=p) for p in (LS[:6], LS[6:])))
    assert named(reply) == [("call_0", SHELL, {"command": "ls"})]


def test_a_whole_call_in_one_chunk_with_finish_reason_stop() -> None:
    reply = assemble(
        chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "a", "type": "function",
               "function": {"name": SHELL, "arguments": LS}}]}),
        chunk({}, "stop"),
    )  # fmt: skip
    assert named(reply) == [("a", SHELL, {"command": "ls"})]


def test_repeated_ids_in_one_reply_become_distinct() -> None:
    reply = assemble(call(0, "dup", TIME, "{}"), call(1, "dup", SHELL, LS))
    assert [c.id for c in reply.tool_calls] == ["dup", "dup_2"]


def test_a_choice_without_delta_is_ignored() -> None:
    reply = assemble(
        chunk({"content": "ok"}),
        chunk(None, content_filter_results={"hate": {"filtered": False}}),
        chunk(None, "stop"),
    )
    assert reply.text == "ok"


def test_chunks_without_choices_and_unknown_fields_are_ignored() -> None:
    reply = assemble(
        {"id": "c", "choices": [], "usage": {"prompt_tokens": 3}},
        chunk({"content": "ok", "audio": None, "x_vendor": {"a": 1}}, provider="vendor"),
        {"id": "c", "choices": None},
        {"id": "c"},
        chunk({}, "stop", usage={"total_tokens": 9}),
    )
    assert reply.text == "ok"


def test_a_second_choice_does_not_mix_into_the_first() -> None:
    reply = assemble(
        {"choices": [{"index": 0, "delta": {"content": "one"}}]},
        {"choices": [{"index": 1, "delta": {"content": "two"}}]},
    )
    assert reply.text == "one"


def test_arguments_split_inside_an_escape_and_a_surrogate_pair() -> None:
    arguments = json.dumps({"command": 'echo "a\\b" 😀 é'})
    # Split inside the JSON escapes themselves: between "\" and its next character.
    cut = arguments.index("\\") + 1
    pieces = [arguments[:cut], arguments[cut:]]
    reply = assemble(call(0, "a", SHELL, pieces[0]), call(0, arguments=pieces[1]))
    assert json.loads(reply.tool_calls[0].arguments) == {"command": 'echo "a\\b" 😀 é'}
    # Raw (unescaped) text whose emoji was split into its two UTF-16 halves.
    raw = '{"command": "echo 😀"}'.encode("utf-16-le").decode("utf-16-le", "surrogatepass")
    high, low = "\ud83d", "\ude00"
    before, after = raw.split("😀")
    reply = assemble(call(0, "a", SHELL, before + high), call(0, arguments=low + after))
    assert json.loads(reply.tool_calls[0].arguments) == {"command": "echo 😀"}


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    assert assemble(chunk({"content": "half \ud83d"})).text == "half \ufffd"
    # In a call's id too (it is sent back with the result: the next request failed).
    reply = assemble(call(0, "id\ud800z", SHELL, LS), call(1, "x" * 5000, TIME, "{}"))
    assert [c.id for c in reply.tool_calls] == ["id\ufffdz", "x" * 256]


def test_reasoning_is_kept_apart_with_the_field_it_came_in() -> None:
    assembler = StreamAssembler(DEFAULT)
    added = assembler.feed(chunk({"reasoning_content": "think"}))
    assembler.feed(chunk({"reasoning_content": "ing", "content": "answer"}))
    reply = assembler.finish()
    assert added.reasoning == "think"
    assert (reply.text, reply.reasoning) == ("answer", "thinking")
    assert reply.echo == {"reasoning_field": "reasoning_content"}
    other = assemble(chunk({"reasoning": "r"}), chunk({}, "stop"))
    assert (other.text, other.reasoning, other.echo) == ("", "r", {"reasoning_field": "reasoning"})


def test_extra_content_of_each_call_is_kept() -> None:
    signature = {"google": {"thought_signature": "sig-a"}}
    reply = assemble(
        call(0, "a", SHELL, LS, extra_content=signature),
        call(1, "b", TIME, "{}", extra_content={"google": {"thought_signature": "sig-b"}}),
    )
    assert reply.tool_calls[0].echo == {"extra_content": signature}
    assert reply.tool_calls[1].echo["extra_content"]["google"]["thought_signature"] == "sig-b"


def test_empty_arguments_are_an_empty_object() -> None:
    reply = assemble(call(0, "a", TIME, ""), chunk({}, "tool_calls"))
    assert reply.tool_calls[0].arguments == "{}"


@pytest.mark.parametrize(
    ("finish", "words"),
    [
        (None, "stream ended in the middle of a tool call's arguments"),
        ("length", "token limit"),
        ("tool_calls", "malformed tool call"),
    ],
)
def test_incomplete_arguments_are_refused(finish: str | None, words: str) -> None:
    chunks = [call(0, "a", SHELL, '{"command": "echo \\"hi')]
    if finish:
        chunks.append(chunk({}, finish))
    with pytest.raises(IncompleteReply, match=words):
        assemble(*chunks)


@pytest.mark.parametrize(
    ("chunks", "words"),
    [
        # Azure's content filter: a choice with no delta, finished content_filter.
        ([chunk(None, "content_filter")], "content filter withheld"),
        # A reasoning model whose thinking used the whole completion budget.
        ([chunk({"reasoning_content": "hmm"}), chunk({}, "length")], "its reasoning used it all"),
        ([chunk({}, "length")], "token limit before any answer"),
        # Only a usage chunk, choices empty: the stream ended and nothing was said.
        ([chunk(), {"id": "c", "choices": [], "usage": {"total_tokens": 3}}], "without an answer"),
    ],
)
def test_an_empty_reply_the_finish_explains_is_told_not_taken_for_an_answer(
    chunks: list[dict[str, Any]], words: str
) -> None:
    """It completed the turn with an empty answer, and the person saw nothing."""
    with pytest.raises(IncompleteReply, match=words):
        assemble(*chunks)


def test_an_empty_reply_finished_with_stop_is_an_answer() -> None:
    # A model that has nothing more to say after a tool's result ends so.
    assert assemble(chunk({"content": ""}), chunk({}, "stop")).text == ""


@pytest.mark.parametrize("depth", [65, 500, 10_000])
def test_arguments_nested_too_deep_are_refused(depth: int) -> None:
    # A few hundred deep parsed, then failed the turn on an internal error (RecursionError)
    # where the arguments were walked again; ten thousand deep failed the parse itself.
    deep = '{"command": "ls", "x": ' + "[" * depth + "]" * depth + "}"
    chunks = [call(0, "a", SHELL, deep[:20]), call(0, None, SHELL, deep[20:])]
    with pytest.raises(IncompleteReply, match="nest lists and objects more than 64 deep"):
        assemble(*chunks, chunk({}, "tool_calls"))
    shallow = '{"command": "ls", "x": ' + "[" * 63 + "]" * 63 + "}"
    assert assemble(call(0, "a", SHELL, shallow), chunk({}, "tool_calls")).tool_calls


def test_a_call_without_a_name_is_refused() -> None:
    with pytest.raises(IncompleteReply, match="without a function name"):
        assemble(call(0, "a", arguments="{}"), chunk({}, "tool_calls"))


@pytest.mark.parametrize(
    "error",
    [
        {"message": "overloaded", "type": "server_error"},
        [{"error": {"message": "overloaded"}}],
        "overloaded",
    ],
)
def test_an_error_object_mid_stream_is_a_model_error(error: Any) -> None:
    assembler = StreamAssembler(DEFAULT)
    assembler.feed(chunk({"content": "par"}))
    with pytest.raises(ModelError, match="overloaded"):
        assembler.feed({"error": error})


def test_no_chunk_at_all_is_refused() -> None:
    with pytest.raises(IncompleteReply, match="no streamed completion"):
        assemble()


def test_content_as_a_list_of_parts_with_thinking() -> None:
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Let me see."}]}
    reply = assemble(
        chunk({"role": "assistant", "content": [thinking]}),
        chunk({"content": [{"type": "text", "text": "Seen"}, {"type": "image_url"}]}),
        chunk({"content": "."}, "stop"),
    )
    assert (reply.text, reply.reasoning) == ("Seen.", "Let me see.")
    # Reasoning that came as content parts has no field to go back in.
    assert reply.echo == {}


@pytest.mark.parametrize("where", ["content", "reasoning_content", "arguments"])
def test_a_reply_that_never_stops_growing_is_cut_off(where: str) -> None:
    """A provider that keeps sending made the server hold all of it: text, reasoning and
    arguments count together against one bound."""
    piece = "x" * 1_000_000

    def delta() -> dict[str, Any]:
        if where == "arguments":
            return call(index=0, arguments=piece)
        return chunk({where: piece})

    assembler = StreamAssembler(DEFAULT)
    assembler.feed(call(index=0, id="c1", name=SHELL, arguments='{"command": "'))
    with pytest.raises(ModelError, match="passed 16,000,000 characters"):
        for _ in range(MAX_REPLY_CHARS // len(piece) + 1):
            assembler.feed(delta())


def test_an_event_stream_labelled_json_is_read_as_its_events() -> None:
    body = (
        "data: " + json.dumps(chunk({"content": "Hel"})) + "\n\n"
        ": keep-alive\n\n"
        "data: " + json.dumps(chunk({"content": "lo"}, "stop")) + "\n\ndata: [DONE]\n\n"
    ).encode()
    assert assemble(*whole_body_chunks(body)).text == "Hello"


def test_a_whole_completion_is_one_chunk_with_its_calls_in_order() -> None:
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": SHELL, "arguments": LS}},
            {"id": "b", "type": "function", "function": {"name": SHELL, "arguments": PWD}},
        ],
    }
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    reply = assemble(*whole_body_chunks(json.dumps(body).encode()))
    assert named(reply) == [("a", SHELL, {"command": "ls"}), ("b", SHELL, {"command": "pwd"})]
