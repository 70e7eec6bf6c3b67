"""Real providers' streaming dialects, replayed byte for byte on the wire to a real server.

Each case ends one of two ways: the calls ran with the right arguments and the next
request is one a strict provider accepts, or the task failed with a sentence a person
can read and the session's next message works.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from core_support import (
    Stack,
    chat_body,
    new_session,
    sse_events,
    temporary_server,
    wait_for,
)
from helpers import register_mock_provider
from replay_support import Replay, ReplayModel, calls_chunk, chunk, fn, sse, text_reply

from strict_order import request_problems

pytestmark = pytest.mark.integration

SHELL = "execute_shell_command"
# What a provider may get back of its own messages; that no other provider gets them is
# checked by test_another_provider_gets_the_plain_history.
ECHO_FIELDS = {
    "message_fields": ["reasoning_content", "reasoning"],
    "call_fields": ["extra_content"],
}


@dataclass
class Env(Stack):
    """A real server whose model is the replay server (``model`` is a ReplayModel)."""

    model: Any

    def turn(self, text: str, session: str, *replies: Replay) -> dict[str, Any]:
        """Script the provider's answers, send one message, and return the finished task."""
        self.model.script(*replies)
        return self.wait_task(self.submit(text, session), timeout=30)

    def ran(self, task: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
        """(tool, arguments, end state) of each call the task made, in the model's order."""
        out = []
        for message in task["messages"]:
            for call in message.get("tool_calls") or []:
                info = self.api(
                    "GET", f"/api/tool-calls/{task['session_id']}/{call['x_tether_call_id']}"
                ).json()
                out.append((info["tool_name"], info["extra"]["arguments"], info["end_state"]))
        return out

    def payloads(self, session: str) -> list[dict[str, Any]]:
        """The session's stored messages, as stored."""
        return [m["message"] for m in self.messages(session)]


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    model = ReplayModel()
    settings = {
        "TETHER_LLM_MAX_RETRIES": "1",  # so a 429 is retried once
        "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
    }
    try:
        with temporary_server("replay", **settings) as server:
            register_mock_provider(server, model.url)
            yield Env(server, model)
    finally:
        model.close()


@pytest.fixture(autouse=True)
def _every_request_valid(env: Env) -> Iterator[None]:
    before = len(env.model.requests)
    yield
    for body in env.model.requests[before:]:
        problems = request_problems(body["messages"], **ECHO_FIELDS)
        assert not problems, (problems, body["messages"])


def _next_message_works(env: Env, session: str) -> None:
    """The session is healthy: one more message completes with a valid request."""
    task = env.turn("still there?", session, text_reply("yes"))
    assert task["result"] == {"status": "completed", "text": "yes", "steps": 1}
    last = env.model.requests[-1]["messages"]
    assert request_problems(last, **ECHO_FIELDS) == [], last
    assert last[-1] == {"role": "user", "content": "still there?"}


def _failed(task: dict[str, Any], words: str) -> str:
    assert task["result"]["status"] == "failed", task["result"]
    error = str(task["result"]["error"])
    assert words in error
    for internal in ("NoneType", "Traceback", "object has no attribute"):
        assert internal not in error
    return error


def _args(command: str) -> str:
    return json.dumps({"command": command})


# ------------------------------------------------------------ sessions never poisoned


def test_a_stream_ending_mid_arguments_fails_readably_and_stores_nothing(env: Env) -> None:
    session = new_session()
    cut = _args("echo never")[:12]
    truncated = Replay(
        [calls_chunk(fn(SHELL, "", index=0, id="call_v1")), calls_chunk(fn(None, cut, index=0))],
        done=False,  # no finish_reason, no [DONE]: vLLM and opencode users saw this
    )
    task = env.turn("run it", session, truncated)
    _failed(task, "the provider's stream ended in the middle of a tool call's arguments")
    assert env.payloads(session) == [{"role": "user", "content": "run it"}]
    _next_message_works(env, session)


def test_a_reasoning_only_reply_is_stored_with_string_content(env: Env) -> None:
    session = new_session()
    thinking = Replay(
        [chunk({"role": "assistant", "reasoning_content": "Hmm."}), chunk({}, "stop")]
    )
    task = env.turn("think", session, thinking)
    assert task["result"]["status"] == "completed"
    stored = env.payloads(session)[-1]
    assert stored["content"] == "" and stored["x_reasoning"] == "Hmm."
    _next_message_works(env, session)
    # Reasoning of an earlier turn is not sent again.
    earlier = env.model.requests[-1]["messages"][-2]
    assert earlier == {"role": "assistant", "content": ""}


# ------------------------------------------------------------ reasoning models and tools


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
        "/api/console/chat",
        json=chat_body("look", session),
        headers={"Authorization": f"Bearer {env.server.token}"},
    ) as resp:
        assert resp.status_code == 200
        events = [e.data for e in sse_events(resp.iter_lines())]
    streamed = [(e["type"], e["text"]) for e in events if e["type"].endswith("_delta")]
    assert streamed == [
        ("reasoning_delta", "Let me "),
        ("reasoning_delta", "see."),
        ("text_delta", "Seen."),
    ]
    assert events[-1]["result"] == {"status": "completed", "text": "Seen.", "steps": 1}
    stored = env.payloads(session)[-1]
    assert (stored["content"], stored["x_reasoning"]) == ("Seen.", "Let me see.")


def test_deepseek_gets_its_reasoning_content_back_with_the_tool_calls(env: Env) -> None:
    session = new_session()
    reply = Replay(
        [
            chunk({"role": "assistant", "content": None, "reasoning_content": "I should "}),
            chunk({"reasoning_content": "list files."}),
            calls_chunk(fn(SHELL, _args("echo listed"), index=0, id="call_00_ds", type="function")),
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
            calls_chunk(fn(SHELL, _args("echo one"), id="g1", extra_content=signatures[0])),
            calls_chunk(fn(SHELL, _args("echo two"), id="g2", extra_content=signatures[1])),
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
            calls_chunk(fn(SHELL, _args("echo x"), index=0, id="c1", extra_content={"k": 1})),
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
            "chat_model": "other-model",
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


def test_gemini_error_bodies_that_are_lists_are_read(env: Env) -> None:
    session = new_session()
    body = [{"error": {"code": 400, "message": "Function call is missing a thought_signature"}}]
    task = env.turn("hi", session, Replay(status=400, body=body))
    _failed(task, "answered 400: Function call is missing a thought_signature")
    _next_message_works(env, session)


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "model overloaded"}},
        "model overloaded",
        {"detail": "model overloaded"},
    ],
    ids=["object", "string", "detail"],
)
def test_error_bodies_of_every_shape_are_read(env: Env, body: Any) -> None:
    session = new_session()
    task = env.turn("hi", session, Replay(status=400, body=body))
    _failed(task, "answered 400: model overloaded")


# ------------------------------------------------------------ parallel calls kept apart


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
            calls_chunk(fn(None, _args("echo first"), id="a")),
            calls_chunk(fn(SHELL, "", id="b")),
            calls_chunk(fn(None, _args("echo second"), id="b")),
            chunk({}, "tool_calls"),
        ]
    )
    _two_calls_ran(env, env.turn("two", new_session(), reply, text_reply("ok")))


def test_calls_without_index_or_id_are_kept_apart_by_their_start(env: Env) -> None:
    first, second = _args("echo first"), _args("echo second")
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


def test_ollama_sends_every_call_at_index_zero(env: Env) -> None:
    reply = Replay(
        [
            calls_chunk(fn(SHELL, _args("echo first"), index=0, id="call_o1")),
            calls_chunk(fn(SHELL, _args("echo second"), index=0, id="call_o2")),
            chunk({}, "tool_calls"),
        ]
    )
    _two_calls_ran(env, env.turn("two", new_session(), reply, text_reply("ok")))


def test_a_name_repeated_in_every_chunk_is_not_concatenated(env: Env) -> None:
    arguments = _args("echo first")
    pieces = [arguments[i : i + 4] for i in range(0, len(arguments), 4)]
    # MiniMax through NVIDIA NIM, Kimi through Fireworks: name and id in every chunk.
    reply = Replay(
        [
            *(calls_chunk(fn(SHELL, p, index=0, id="call_m", type="function")) for p in pieces),
            calls_chunk(fn(SHELL, _args("echo second"), index=1, id="call_n")),
            chunk({}, "tool_calls"),
        ]
    )
    _two_calls_ran(env, env.turn("two", new_session(), reply, text_reply("ok")))


def test_two_calls_with_one_id_both_run_and_are_answered_apart(env: Env) -> None:
    reply = Replay(
        [
            calls_chunk(fn(SHELL, _args("echo first"), index=0, id="dup")),
            calls_chunk(fn(SHELL, _args("echo second"), index=1, id="dup")),
            chunk({}, "tool_calls"),
        ]
    )
    task = env.turn("two", new_session(), reply, text_reply("ok"))
    _two_calls_ran(env, task)
    sent = env.model.requests[-1]["messages"]
    ids = [c["id"] for c in next(m for m in sent if m["role"] == "assistant")["tool_calls"]]
    assert len(set(ids)) == 2
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


# ------------------------------------------------------------ odd chunks


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
    assert task["result"] == {"status": "completed", "text": "filtered fine", "steps": 1}


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
            calls_chunk(fn(SHELL, _args("echo whole"), index=0, id="w1", type="function")),
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


def test_an_error_object_mid_stream_fails_readably(env: Env) -> None:
    session = new_session()
    reply = Replay(
        [
            chunk({"role": "assistant", "content": "Let me "}),
            sse({"error": {"message": "Internal server error in upstream", "code": 502}}),
        ]
    )
    _failed(env.turn("hi", session, reply), "Internal server error in upstream")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    _next_message_works(env, session)


def test_a_connection_cut_mid_arguments_fails_readably(env: Env) -> None:
    session = new_session()
    reply = Replay(
        [calls_chunk(fn(SHELL, _args("echo never")[:10], index=0, id="cut"))],
        done=False,
        cut_short=True,
    )
    _failed(env.turn("hi", session, reply), "the connection to the model provider broke")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    _next_message_works(env, session)


def test_a_stalled_stream_is_stopped_by_the_user(env: Env) -> None:
    session = new_session()
    env.model.script(
        Replay([chunk({"role": "assistant", "content": "thinking"})], done=False, stall=True)
    )
    task_id = env.submit("hi", session)
    assert env.model.srv.stalled.wait(20)
    resp = env.api("POST", f"/api/console/chat/task/{task_id}/stop")
    assert resp.status_code == 200 and resp.json()["stopped"] is True
    assert env.wait_task(task_id, timeout=30)["result"]["status"] == "cancelled"
    env.model.srv.release.set()
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    _next_message_works(env, session)


# ------------------------------------------------------------ ids the model chooses


@pytest.mark.parametrize("model_ids", [("a/b", "..", ".")])
def test_model_chosen_ids_never_reach_a_route(env: Env, model_ids: tuple[str, ...]) -> None:
    session = new_session()
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    wait = f"echo started; while [ ! -e {gate} ]; do sleep 0.02; done"
    reply = Replay(
        [
            *(calls_chunk(fn(SHELL, _args(wait), index=n, id=i)) for n, i in enumerate(model_ids)),
            chunk({}, "tool_calls"),
        ]
    )
    env.model.script(reply, text_reply("stopped"))
    task_id = env.submit("ids", session)

    def all_started() -> list[dict[str, Any]] | None:
        items = env.api("GET", f"/api/tool-calls/{session}").json()["items"]
        return items if len(items) == len(model_ids) else None

    calls = wait_for(all_started, 20, "three calls in flight")
    for info in calls:
        base = f"/api/tool-calls/{session}/{info['tool_call_id']}"
        wait_for(lambda b=base: "started" in json.dumps(env.api("GET", f"{b}/output").json()))
        with env.server._client.stream(
            "GET", f"{base}/stream", headers={"Authorization": f"Bearer {env.server.token}"}
        ) as resp:
            assert resp.status_code == 200
            first = next(line for line in resp.iter_lines() if line.startswith("data:"))
            assert "started" in first
        assert env.api("POST", f"{base}/cancel").status_code in (200, 202)
    task = env.wait_task(task_id, timeout=30)
    assert [state for _, _, state in env.ran(task)] == ["cancelled"] * 3
    # The model's own ids answer its calls.
    sent = env.model.requests[-1]["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == list(model_ids)


# ------------------------------------------------------------ sessions poisoned before


def test_a_session_poisoned_by_an_earlier_version_works_after_the_upgrade(env: Env) -> None:
    session = new_session()
    env.turn("start", session, text_reply("started"))

    def assistant(*calls: tuple[str, str]) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": SHELL, "arguments": a}}
                for i, a in calls
            ],
        }

    def tool(call_id: str, tether_id: str) -> dict[str, Any]:
        return {
            "role": "tool",
            "tool_call_id": call_id,
            "content": "x",
            "x_tether_call_id": tether_id,
        }

    # What earlier versions stored: a reasoning-only reply with null content, arguments
    # cut mid-string, and one id used twice in one reply.
    poisoned = [
        ("assistant", {"role": "assistant", "content": None}),
        ("assistant", assistant(("cut", '{"command": "echo \\"unterminated'))),
        ("tool", tool("cut", "cut")),
        ("assistant", assistant(("dup", _args("echo a")), ("dup", _args("echo b")))),
        ("tool", tool("dup", "dup")),
        ("tool", tool("dup", "dup~2")),
    ]
    env.server.stop()
    with sqlite3.connect(env.server.home / "tether.db") as db:
        db.executemany(
            "INSERT INTO messages (session_id, task_id, kind, payload, created_at)"
            " VALUES (?, NULL, ?, ?, ?)",
            [(session, kind, json.dumps(payload), time.time()) for kind, payload in poisoned],
        )
    db.close()
    env.server.start()
    task = env.turn("and now?", session, text_reply("all good"))
    assert task["result"]["status"] == "completed"
    sent = env.model.requests[-1]["messages"]
    assert request_problems(sent) == [], sent
    tools = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert tools == ["cut", "dup", "dup_2"]


def test_a_stream_line_that_is_not_json_fails_readably(env: Env) -> None:
    session = new_session()
    reply = Replay([chunk({"role": "assistant", "content": "Hi"}), b"data: {not json\n\n"])
    error = _failed(env.turn("hi", session, reply), "the model provider sent")
    assert "JSON" in error
    _next_message_works(env, session)


def test_a_reply_that_is_not_a_stream_fails_readably(env: Env) -> None:
    session = new_session()
    whole = {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    }
    _failed(env.turn("hi", session, Replay(status=200, body=whole)), "no streamed completion")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    _next_message_works(env, session)


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
    assert task["result"] == {"status": "completed", "text": "Four.", "steps": 1}
    assert env.payloads(session)[-1]["x_reasoning"] == "Simple."
    _next_message_works(env, session)
