"""Real providers' streaming dialects, replayed byte for byte on the wire to a real server.

Each case ends with the calls run with the right arguments and a next request that a
strict provider accepts (checked after every test).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import groupby
from typing import Any

import pytest
from core_support import chat_body, new_session, sse_events
from helpers import register_mock_provider
from replay_support import (
    SHELL,
    Env,
    Replay,
    calls_chunk,
    chunk,
    fn,
    replay_env,
    shell_args,
    sse,
    text_reply,
)

from strict_order import request_problems

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    yield from replay_env("replay")


@pytest.fixture(autouse=True)
def _every_request_valid(env: Env) -> Iterator[None]:
    yield from env.requests_checked()


def test_a_reasoning_only_reply_is_stored_with_string_content(env: Env) -> None:
    session = new_session()
    thinking = Replay(
        [chunk({"role": "assistant", "reasoning_content": "Hmm."}), chunk({}, "stop")]
    )
    task = env.turn("think", session, thinking)
    assert task["result"]["status"] == "completed"
    stored = env.payloads(session)[-1]
    assert stored["content"] == "" and stored["x_reasoning"] == "Hmm."
    env.next_message_works(session)
    # Reasoning of an earlier turn is not sent again.
    earlier = env.model.requests[-1]["messages"][-2]
    assert earlier == {"role": "assistant", "content": ""}


def test_reasoning_arrives_on_the_chat_stream_as_its_own_event(env: Env) -> None:
    session = new_session()
    env.model.script(
        Replay(
            [
                chunk({"role": "assistant", "reasoning": "Let me "}),  # Ollama, OpenRouter
                chunk({"reasoning": "see."}),
                chunk({"content": "Seen."}),
                chunk({}, "stop"),
            ]
        )
    )
    with env.server._client.stream(
        "POST",
        "/api/console/chat?events=tether",
        json=chat_body("look", session),
        headers={"Authorization": f"Bearer {env.server.token}"},
    ) as resp:
        assert resp.status_code == 200
        events = [e.data for e in sse_events(resp.iter_lines())]
    deltas = [e for e in events if e["type"].endswith("_delta")]
    # Deltas that wait together are sent joined (one write per batch).
    streamed = [(kind, "".join(e["text"] for e in run)) for kind, run in groupby(deltas, _kind)]
    assert streamed == [("reasoning_delta", "Let me see."), ("text_delta", "Seen.")]
    assert events[-1]["result"] == {"status": "completed", "text": "Seen.", "steps": 1}
    stored = env.payloads(session)[-1]
    assert (stored["content"], stored["x_reasoning"]) == ("Seen.", "Let me see.")


def _kind(event: dict[str, Any]) -> str:
    return str(event["type"])


def test_deepseek_gets_its_reasoning_content_back_with_the_tool_calls(env: Env) -> None:
    session = new_session()
    reply = Replay(
        [
            chunk({"role": "assistant", "content": None, "reasoning_content": "I should "}),
            chunk({"reasoning_content": "list files."}),
            calls_chunk(
                fn(SHELL, shell_args("echo listed"), index=0, id="call_00_ds", type="function")
            ),
            chunk({}, "tool_calls"),
        ]
    )
    task = env.turn("list", session, reply, text_reply("done"))
    assert env.ran(task) == [(SHELL, {"command": "echo listed"}, "success")]
    assert task["result"]["text"] == "done"
    sent = env.model.requests[-1]["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "I should list files."
    assert assistant["tool_calls"][0]["id"] == "call_00_ds"
    tool = next(m for m in sent if m["role"] == "tool")
    assert tool["tool_call_id"] == "call_00_ds" and tool["content"].startswith("listed")


def test_gemini_gets_each_calls_thought_signature_back(env: Env) -> None:
    session = new_session()
    signatures = [{"google": {"thought_signature": f"sig-{n}"}} for n in (1, 2)]
    # Gemini's gateway sends whole calls without an index.
    reply = Replay(
        [
            calls_chunk(fn(SHELL, shell_args("echo one"), id="g1", extra_content=signatures[0])),
            calls_chunk(fn(SHELL, shell_args("echo two"), id="g2", extra_content=signatures[1])),
            chunk({}, "stop"),
        ]
    )
    task = env.turn("two", session, reply, text_reply("ok"))
    assert env.ran(task) == [
        (SHELL, {"command": "echo one"}, "success"),
        (SHELL, {"command": "echo two"}, "success"),
    ]
    sent = env.model.requests[-1]["messages"]
    calls = next(m for m in sent if m["role"] == "assistant")["tool_calls"]
    assert [c["extra_content"] for c in calls] == signatures


def test_another_provider_gets_the_plain_history(env: Env) -> None:
    session = new_session()
    reply = Replay(
        [
            chunk({"reasoning_content": "plan"}),
            calls_chunk(fn(SHELL, shell_args("echo x"), index=0, id="c1", extra_content={"k": 1})),
            chunk({}, "tool_calls"),
        ]
    )
    env.turn("go", session, reply, text_reply("ok"))
    resp = env.api(
        "POST",
        "/api/models/custom-providers",
        json={
            "id": "replay-other",
            "name": "Another provider",
            "default_base_url": env.model.url,
            "models": [{"id": "other-model", "name": "other"}],
        },
    )
    assert resp.status_code in (201, 409), resp.text
    switch = {"provider_id": "replay-other", "model": "other-model", "scope": "global"}
    assert env.api("PUT", "/api/models/active", json=switch).status_code == 200
    try:
        env.turn("again", session, text_reply("fine"))
    finally:
        register_mock_provider(env.server, env.model.url)
    # The strictest check: no field at all beyond OpenAI's own.
    sent = env.model.requests[-1]["messages"]
    assert request_problems(sent) == [], sent


def _two_calls_ran(env: Env, task: dict[str, Any]) -> None:
    assert env.ran(task) == [
        (SHELL, {"command": "echo first"}, "success"),
        (SHELL, {"command": "echo second"}, "success"),
    ]
    tools = [m for m in env.model.requests[-1]["messages"] if m["role"] == "tool"]
    assert [t["content"].split("\n")[0] for t in tools] == ["first", "second"]


def test_calls_without_an_index_are_kept_apart_by_id(env: Env) -> None:
    reply = Replay(
        [
            calls_chunk(fn(SHELL, "", id="a")),
            calls_chunk(fn(None, shell_args("echo first"), id="a")),
            calls_chunk(fn(SHELL, "", id="b")),
            calls_chunk(fn(None, shell_args("echo second"), id="b")),
            chunk({}, "tool_calls"),
        ]
    )
    _two_calls_ran(env, env.turn("two", new_session(), reply, text_reply("ok")))


def test_calls_without_index_or_id_are_kept_apart_by_their_start(env: Env) -> None:
    first, second = shell_args("echo first"), shell_args("echo second")
    reply = Replay(
        [
            calls_chunk(fn(SHELL, first[:9])),
            calls_chunk(fn(None, first[9:])),
            calls_chunk(fn(SHELL, second[:9])),
            calls_chunk(fn(None, second[9:])),
            chunk({}, "tool_calls"),
        ]
    )
    _two_calls_ran(env, env.turn("two", new_session(), reply, text_reply("ok")))


def test_calls_without_an_index_whose_id_comes_after_their_name(env: Env) -> None:
    first, second = shell_args("echo first"), shell_args("echo second")
    reply = Replay(
        [
            calls_chunk(fn(SHELL, first[:9])),
            calls_chunk(fn(None, first[9:], id="a")),
            calls_chunk(fn(SHELL, second[:9])),
            calls_chunk(fn(None, second[9:], id="b")),
            chunk({}, "tool_calls"),
        ]
    )
    _two_calls_ran(env, env.turn("two", new_session(), reply, text_reply("ok")))


def test_ollama_sends_every_call_at_index_zero(env: Env) -> None:
    reply = Replay(
        [
            calls_chunk(fn(SHELL, shell_args("echo first"), index=0, id="call_o1")),
            calls_chunk(fn(SHELL, shell_args("echo second"), index=0, id="call_o2")),
            chunk({}, "tool_calls"),
        ]
    )
    _two_calls_ran(env, env.turn("two", new_session(), reply, text_reply("ok")))


def test_a_name_repeated_in_every_chunk_is_not_concatenated(env: Env) -> None:
    arguments = shell_args("echo first")
    pieces = [arguments[i : i + 4] for i in range(0, len(arguments), 4)]
    # MiniMax through NVIDIA NIM, Kimi through Fireworks: name and id in every chunk.
    reply = Replay(
        [
            *(calls_chunk(fn(SHELL, p, index=0, id="call_m", type="function")) for p in pieces),
            calls_chunk(fn(SHELL, shell_args("echo second"), index=1, id="call_n")),
            chunk({}, "tool_calls"),
        ]
    )
    _two_calls_ran(env, env.turn("two", new_session(), reply, text_reply("ok")))


def test_two_calls_with_one_id_both_run_and_are_answered_apart(env: Env) -> None:
    reply = Replay(
        [
            calls_chunk(fn(SHELL, shell_args("echo first"), index=0, id="dup")),
            calls_chunk(fn(SHELL, shell_args("echo second"), index=1, id="dup")),
            chunk({}, "tool_calls"),
        ]
    )
    task = env.turn("two", new_session(), reply, text_reply("ok"))
    _two_calls_ran(env, task)
    sent = env.model.requests[-1]["messages"]
    ids = [c["id"] for c in next(m for m in sent if m["role"] == "assistant")["tool_calls"]]
    assert len(set(ids)) == 2
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


def test_azure_content_filter_choices_without_delta_are_ignored(env: Env) -> None:
    session = new_session()
    reply = Replay(
        [
            sse({"id": "", "object": "", "created": 0, "model": "", "choices": [],
                 "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]}),
            chunk({"role": "assistant", "content": "filtered "}),
            chunk({"content": "fine"}),
            chunk(None, "stop", usage=None),
            chunk(None, None, content_filter_offsets={"start_offset": 0, "end_offset": 9}),
        ]
    )  # fmt: skip
    task = env.turn("hi", session, reply)
    expected = {"status": "completed", "text": "filtered fine", "steps": 1}
    assert task["result"] == {**expected, "session_id": session}


def test_arguments_split_inside_escapes_and_utf8_characters(env: Env) -> None:
    command = 'printf "%s\\n" "héllo \\"q\\" 😀"'
    arguments = json.dumps({"command": command}, ensure_ascii=False)
    escape_at = arguments.index("\\") + 1  # between a backslash and what it escapes
    reply = Replay(
        [
            calls_chunk(fn(SHELL, arguments[:escape_at], index=0, id="u0")),
            calls_chunk(fn(None, arguments[escape_at:], index=0)),
            chunk({}, "tool_calls"),
        ]
    )
    task = env.turn("utf", new_session(), reply, text_reply("ok"))
    assert env.ran(task) == [(SHELL, {"command": command}, "success")]
    # The same call sent as raw UTF-8, its bytes cut inside the emoji and inside "é".
    delta = {"tool_calls": [fn(SHELL, arguments, index=0, id="u1")]}
    frame = (
        f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta}]}, ensure_ascii=False)}\n\n"
    )
    raw = frame.encode()
    cuts = [raw.index("é".encode()) + 1, raw.index("😀".encode()) + 2]
    pieces = [raw[: cuts[0]], raw[cuts[0] : cuts[1]], raw[cuts[1] :]]
    split = Replay([*pieces, chunk({}, "tool_calls")])
    task = env.turn("utf again", new_session(), split, text_reply("ok"))
    assert env.ran(task) == [(SHELL, {"command": command}, "success")]
    tool = next(m for m in env.model.requests[-1]["messages"] if m["role"] == "tool")
    assert tool["content"].startswith('héllo "q" 😀')


def test_a_whole_call_in_one_chunk_with_finish_stop_sse_comments_and_a_usage_chunk(
    env: Env,
) -> None:
    reply = Replay(
        [
            b": OPENROUTER PROCESSING\n\n",
            calls_chunk(fn(SHELL, shell_args("echo whole"), index=0, id="w1", type="function")),
            b": keep-alive\n\n",
            chunk({}, "stop"),
            sse({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}),
        ]
    )  # fmt: skip
    task = env.turn("whole", new_session(), reply, text_reply("ok"))
    assert env.ran(task) == [(SHELL, {"command": "echo whole"}, "success")]
    assert task["result"]["text"] == "ok"


def test_a_429_with_retry_after_is_retried(env: Env) -> None:
    limited = Replay(
        status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "1"}
    )
    before = len(env.model.requests)
    task = env.turn("hi", new_session(), limited, text_reply("after the wait"))
    assert task["result"]["text"] == "after the wait"
    assert len(env.model.requests) - before == 2


def test_mistral_content_parts_give_the_answer_and_its_reasoning(env: Env) -> None:
    session = new_session()
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Simple."}]}
    reply = Replay(
        [
            chunk({"role": "assistant", "content": [thinking]}),
            chunk({"content": [{"type": "text", "text": "Four."}]}),
            chunk({}, "stop"),
        ]
    )
    task = env.turn("2+2?", session, reply)
    assert task["result"] == {
        "status": "completed",
        "text": "Four.",
        "steps": 1,
        "session_id": session,
    }
    assert env.payloads(session)[-1]["x_reasoning"] == "Simple."
    env.next_message_works(session)


def test_events_without_data_are_skipped_as_keep_alives(env: Env) -> None:
    """Gateways keep a stream alive with ``data:`` and nothing after it, or with an event
    that has no data line at all; the SSE spec dispatches none of them (each failed the
    turn as 'not JSON')."""
    session = new_session()
    reply = Replay(
        [
            b"retry: 3000\n\n",
            chunk({"role": "assistant", "content": "Hel"}),
            b"data: \n\n",
            b"data:\n\n",
            b"id: 7\n\n",
            b"event: ping\n\n",
            b"data: \ndata: \n\n",
            # CRLF line ends, one of them split between two writes.
            chunk({"content": "lo"}).replace(b"\n", b"\r\n")[:-1],
            b"\n",
            chunk({}, "stop"),
        ]
    )
    task = env.turn("hi", session, reply)
    expected = {"status": "completed", "text": "Hello", "steps": 1}
    assert task["result"] == {**expected, "session_id": session}
    env.next_message_works(session)


def test_bytes_that_are_not_utf8_read_as_replacement_characters(env: Env) -> None:
    session = new_session()
    latin1 = b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9"}}]}\n\n'
    task = env.turn("hi", session, Replay([latin1, chunk({}, "stop")]))
    expected = {"status": "completed", "text": "caf\ufffd", "steps": 1}
    assert task["result"] == {**expected, "session_id": session}
    env.next_message_works(session)


def test_arguments_sent_as_an_object_rather_than_a_string_are_kept(env: Env) -> None:
    """llama.cpp's server and Hugging Face's TGI have sent a call's arguments as a JSON
    object: read as no arguments, the call ran without them."""

    def call(call_id: str, command: str) -> dict[str, Any]:
        arguments = {"command": command}
        return {"index": 0, "id": call_id, "function": {"name": SHELL, "arguments": arguments}}

    streamed = Replay([calls_chunk(call("o1", "echo first")), chunk({}, "tool_calls")])
    message = {"role": "assistant", "content": None, "tool_calls": [call("o2", "echo second")]}
    whole = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    task = env.turn("two", new_session(), streamed, Replay(body=whole), text_reply("ok"))
    _two_calls_ran(env, task)


def _usage_only(choices: Any) -> bytes:
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    return sse({"id": "u", "object": "chat.completion.chunk", "choices": choices, "usage": usage})


# Stream shapes real providers send that need nothing of their own: each must read as
# the answer "Hello" (they guard the event-stream reader, llm/sse.py, as much as the
# assembly).
PLAIN_SHAPES = {
    # OpenAI: a role-only first chunk with refusal null, usage null on every chunk, then
    # a usage-only chunk with empty choices (stream_options.include_usage).
    "openai": Replay(
        [
            chunk({"role": "assistant", "content": "", "refusal": None}, usage=None),
            chunk({"content": "Hello"}, usage=None),
            chunk({}, "stop", usage=None),
            _usage_only([]),
        ]
    ),
    # DeepSeek: ': keep-alive' comments while the request waits to be scheduled.
    "deepseek": Replay(
        [b": keep-alive\n\n", b": keep-alive\n\n", chunk({"content": "Hello"}), chunk({}, "stop")]
    ),
    # Gemini through some gateways: finish_reason 'stop' on every chunk, no [DONE].
    "gemini": Replay(
        [chunk({"content": "Hel"}, "stop"), chunk({"content": "lo"}, "stop")], done=False
    ),
    # vLLM (before its fix) and GLM: the last text and the finish reason in one chunk.
    "vllm": Replay(
        [chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}, "stop")]
    ),
    # vllm-mlx: a natural stop that never says 'stop' (finish_reason null to the end).
    "vllm-mlx": Replay([chunk({"content": "Hello"}), chunk({"content": ""})]),
    # Gateways written in Go or Rust: no space after 'data:', '\r\n' line ends, and a
    # usage chunk whose choices are null.
    "compact": Replay(
        [
            chunk({"content": "Hello"}).replace(b"data: ", b"data:").replace(b"\n", b"\r\n"),
            chunk({}, "stop").replace(b"data: ", b"data:"),
            _usage_only(None),
            b"data:[DONE]\r\n\r\n",
        ],
        done=False,
    ),
}


@pytest.mark.parametrize("reply", list(PLAIN_SHAPES.values()), ids=list(PLAIN_SHAPES))
def test_plain_stream_shapes_of_real_providers_read_as_the_answer(env: Env, reply: Replay) -> None:
    session = new_session()
    task = env.turn("hi", session, reply)
    expected = {"status": "completed", "text": "Hello", "steps": 1}
    assert task["result"] == {**expected, "session_id": session}


REFUSED = "I'm sorry, I can't help with that."

# OpenAI words a refusal in a field of its own and leaves content null: streamed, a
# role chunk with refusal "" then refusal pieces, finish 'stop'; whole, message.refusal.
REFUSALS = {
    "streamed": Replay(
        [
            chunk({"role": "assistant", "content": None, "refusal": ""}),
            chunk({"content": None, "refusal": "I'm sorry, I can't "}),
            chunk({"content": None, "refusal": "help with that."}),
            chunk({}, "stop"),
        ]
    ),
    "whole": Replay(
        body={
            "id": "chatcmpl-w",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "refusal": REFUSED},
                    "finish_reason": "stop",
                }
            ],
        }
    ),
}


@pytest.mark.parametrize("reply", list(REFUSALS.values()), ids=list(REFUSALS))
def test_a_refusal_is_the_answer_and_says_it_is_one(env: Env, reply: Replay) -> None:
    """A refusal read as an empty answer: the turn completed with no text at all."""
    session = new_session()
    task = env.turn("hi", session, reply)
    expected = {"status": "completed", "text": REFUSED, "steps": 1, "refusal": True}
    assert task["result"] == {**expected, "session_id": session}
    stored = env.payloads(session)[-1]
    assert (stored["content"], stored["x_refusal"]) == (REFUSED, True)
    env.next_message_works(session)
    # The model reads what it said, as content; Tether's mark is its own.
    assert env.model.requests[-1]["messages"][-2] == {"role": "assistant", "content": REFUSED}


def test_a_refusal_streams_to_the_chat_as_its_text(env: Env) -> None:
    session = new_session()
    env.model.script(REFUSALS["streamed"])
    with env.server._client.stream(
        "POST",
        "/api/console/chat",
        json=chat_body("hi", session),
        headers={"Authorization": f"Bearer {env.server.token}"},
    ) as resp:
        assert resp.status_code == 200
        frames = [e.data for e in sse_events(resp.iter_lines())]
    streamed = "".join(f["text"] for f in frames if f.get("object") == "content" and f["delta"])
    assert streamed == REFUSED
    response = frames[-1]
    assert response["status"] == "completed"
    assert [m["content"][0]["text"] for m in response["output"]] == [REFUSED]


@pytest.mark.parametrize(
    ("cut", "text"),
    [(1, "Hello"), (2, "Hello"), (12, "Hel")],
    ids=["one-line-end", "no-line-end", "inside-the-json"],
)
def test_a_stream_that_ends_without_its_last_blank_line(env: Env, cut: int, text: str) -> None:
    """A proxy that drops the final blank line (or the last line end too) of a stream
    with no [DONE]: its last event, whose data is whole JSON, is kept (the spec drops it,
    and with it the last text and the finish reason, without a word); one cut inside its
    JSON is still dropped."""
    session = new_session()
    last = chunk({"content": "lo"}, "stop")
    reply = Replay([chunk({"role": "assistant", "content": "Hel"}), last[:-cut]], done=False)
    task = env.turn("hi", session, reply)
    expected = {"status": "completed", "text": text, "steps": 1}
    assert task["result"] == {**expected, "session_id": session}
