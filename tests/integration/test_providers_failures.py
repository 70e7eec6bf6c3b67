"""Provider failures, replayed on the wire: each ends with a sentence a person can read,
a history as valid as before, and a session whose next message works. Also: ids the model
chooses never reach a route, and sessions poisoned by earlier versions are mended.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_support import chat_body, new_session, sse_events, wait_for
from helpers import MOCK_LLM_PROVIDER_ID
from replay_support import (
    SHELL,
    Env,
    Replay,
    calls_chunk,
    chunk,
    failed,
    fn,
    replay_env,
    shell_args,
    sse,
    text_reply,
)

from database_support import on_postgresql
from strict_order import request_problems
from tether.llm.reply import MAX_CALLS_PER_REPLY
from tether.llm.sse import MAX_EVENT_BYTES

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    yield from replay_env("failures")


@pytest.fixture(autouse=True)
def _every_request_valid(env: Env) -> Iterator[None]:
    yield from env.requests_checked()


def test_a_stream_ending_mid_arguments_fails_readably_and_stores_nothing(env: Env) -> None:
    session = new_session()
    cut = shell_args("echo never")[:12]
    truncated = Replay(
        [calls_chunk(fn(SHELL, "", index=0, id="call_v1")), calls_chunk(fn(None, cut, index=0))],
        done=False,  # no finish_reason, no [DONE]: vLLM and opencode users saw this
    )
    task = env.turn("run it", session, truncated)
    failed(task, "the provider's stream ended in the middle of a tool call's arguments")
    assert env.payloads(session) == [{"role": "user", "content": "run it"}]
    env.next_message_works(session)


@pytest.mark.parametrize("depth", [500, 10_000])
def test_arguments_nested_too_deep_fail_readably_and_store_nothing(env: Env, depth: int) -> None:
    session = new_session()
    deep = '{"command": "echo hi", "x": ' + "[" * depth + "]" * depth + "}"
    reply = Replay([calls_chunk(fn(SHELL, deep, index=0, id="d1")), chunk({}, "tool_calls")])
    failed(env.turn("run it", session, reply), "nest lists and objects more than 64 deep")
    assert env.payloads(session) == [{"role": "user", "content": "run it"}]
    env.next_message_works(session)


def test_gemini_error_bodies_that_are_lists_are_read(env: Env) -> None:
    session = new_session()
    body = [{"error": {"code": 400, "message": "Function call is missing a thought_signature"}}]
    task = env.turn("hi", session, Replay(status=400, body=body))
    failed(task, "answered 400: Function call is missing a thought_signature")
    env.next_message_works(session)


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
    failed(task, "answered 400: model overloaded")


def test_an_error_object_mid_stream_fails_readably(env: Env) -> None:
    session = new_session()
    reply = Replay(
        [
            chunk({"role": "assistant", "content": "Let me "}),
            sse({"error": {"message": "Internal server error in upstream", "code": 502}}),
        ]
    )
    failed(env.turn("hi", session, reply), "Internal server error in upstream")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_a_connection_cut_mid_arguments_fails_readably(env: Env) -> None:
    session = new_session()
    reply = Replay(
        [calls_chunk(fn(SHELL, shell_args("echo never")[:10], index=0, id="cut"))],
        done=False,
        cut_short=True,
    )
    failed(env.turn("hi", session, reply), "the connection to the model provider broke")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


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
    env.next_message_works(session)


@pytest.mark.parametrize("model_ids", [("a/b", "..", ".")])
def test_model_chosen_ids_never_reach_a_route(env: Env, model_ids: tuple[str, ...]) -> None:
    session = new_session()
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    wait = f"echo started; while [ ! -e {gate} ]; do sleep 0.02; done"
    reply = Replay(
        [
            *(
                calls_chunk(fn(SHELL, shell_args(wait), index=n, id=i))
                for n, i in enumerate(model_ids)
            ),
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
        ("assistant", assistant(("dup", shell_args("echo a")), ("dup", shell_args("echo b")))),
        ("tool", tool("dup", "dup")),
        ("tool", tool("dup", "dup~2")),
    ]
    if on_postgresql():
        pytest.skip("writes an earlier version's rows into the SQLite file directly")
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
    error = failed(env.turn("hi", session, reply), "the model provider sent")
    assert "JSON" in error
    env.next_message_works(session)


def test_a_whole_completion_from_a_gateway_that_ignored_stream_is_taken(env: Env) -> None:
    """A gateway that ignores ``stream: true`` answers with one chat completion: its
    message, tool calls included, is the reply (it failed the turn as 'no streamed
    completion')."""
    session = new_session()
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "w1",
                "type": "function",
                "function": {"name": SHELL, "arguments": json.dumps({"command": "echo whole"})},
            }
        ],
    }
    whole = {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    answer = {**whole, "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    task = env.turn("hi", session, Replay(body=whole), Replay(body={**answer, "usage": {}}))
    assert task["result"]["status"] == "completed", task
    assert env.ran(task) == [(SHELL, {"command": "echo whole"}, "success")]
    assert task["result"]["text"] == "hi"
    env.next_message_works(session)


def test_an_error_answered_with_200_is_told_in_the_provider_s_words(env: Env) -> None:
    session = new_session()
    body = {"error": {"message": "quota exceeded for this key", "code": "quota"}}
    error = failed(env.turn("hi", session, Replay(body=body)), "reported an error")
    assert "quota exceeded for this key" in error
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_a_page_that_is_not_a_reply_fails_readably(env: Env) -> None:
    session = new_session()
    page = b"<html><body>Sign in to the proxy</body></html>"
    reply = Replay(body=page, headers={"Content-Type": "text/html"})
    failed(env.turn("hi", session, reply), "no streamed completion")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_a_line_that_never_ends_is_cut_off_at_the_cap(env: Env) -> None:
    """A gateway that sends one line without end (here, just past the cap, then nothing
    more) fails the turn at the cap; it was held whole (the SDK's decoder has no bound)
    until the line ended or the connection did."""
    session = new_session()
    megabyte = b"x" * (1 << 20)
    endless = [b"data: ", *[megabyte] * (MAX_EVENT_BYTES // len(megabyte) + 1)]
    started = chunk({"role": "assistant", "content": "Hi"})
    reply = Replay([started, *endless], done=False, stall=True)
    try:
        task = env.turn("hi", session, reply)
    finally:
        env.model.srv.release.set()
    failed(task, f"sent more than {MAX_EVENT_BYTES:,} bytes without ending a line or an event")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ('{"type": "overloaded_error", "message": "Overloaded"}', "reported an error: Overloaded"),
        ('{"code": 503, "type": "upstream_unavailable"}', '"type": "upstream_unavailable"'),
        ("upstream timed out", "reported an error: upstream timed out"),
    ],
    ids=["message", "no-message", "not-json"],
)
def test_an_error_event_fails_the_turn_whatever_its_data(env: Env, data: str, words: str) -> None:
    """``event: error`` whose data has no ``error`` key was read as an ordinary chunk: the
    reply so far ("Let me ") was stored as if it were whole."""
    session = new_session()
    event = f"event: error\ndata: {data}\n\n".encode()
    reply = Replay([chunk({"role": "assistant", "content": "Let me "}), event, chunk({}, "stop")])
    failed(env.turn("hi", session, reply), words)
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_an_error_event_is_quoted_bounded_and_without_credentials(env: Env) -> None:
    session = new_session()
    said = {"code": 401, "api_key": "sk-live-0123456789abcdef", "trace": "x" * 10_000}
    event = f"event: error\ndata: {json.dumps(said)}\n\n".encode()
    error = failed(env.turn("hi", session, Replay([event])), '"code": 401')
    assert "0123456789abcdef" not in error
    assert len(error) < 1_000


@pytest.fixture(scope="module")
def deadline_env() -> Iterator[Env]:
    """A server with short time limits: a reply's deadline of 2 s, and 3 s between two
    pieces of a reply (which is also the whole of a connection test)."""
    yield from replay_env(
        "deadline", TETHER_LLM_REPLY_DEADLINE_SECONDS="2", TETHER_LLM_TIMEOUT_SECONDS="3"
    )


@pytest.mark.parametrize("keep_alive", [b": ping\n\n", b" "], ids=["comments", "a-byte-at-a-time"])
def test_a_reply_that_never_ends_fails_at_the_reply_deadline(
    deadline_env: Env, keep_alive: bytes
) -> None:
    """Keep-alives (or a byte now and then) never leave the stream quiet for
    TETHER_LLM_TIMEOUT_SECONDS: without a bound on the whole reply the turn ran until a
    person stopped it."""
    env, session = deadline_env, new_session()
    started = chunk({"role": "assistant", "content": "Let me "})
    reply = Replay([started], done=False, keep_alive=keep_alive)
    failed(env.turn("hi", session, reply), "reply was still coming after 2 s")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_retries_count_against_the_reply_deadline(deadline_env: Env) -> None:
    """The deadline bounds the wait for one reply, whatever happens meanwhile: a 429 whose
    Retry-After is past it fails the turn at the deadline, not after the wait."""
    env, session = deadline_env, new_session()
    limited = Replay(status=429, body={"error": {"message": "slow"}}, headers={"Retry-After": "50"})
    task = env.turn("hi", session, limited, text_reply("too late"))
    failed(task, "had not begun its reply after 2 s")
    env.next_message_works(session)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Replay([b": ping\n\n"], done=False, keep_alive=b": ping\n\n"), "after 3 s"),
        (Replay(body=b"<html>Sign in</html>", headers={"Content-Type": "text/html"}), "held no"),
        (Replay([b'event: error\ndata: {"message": "overloaded"}\n\n']), "error: overloaded"),
        (Replay([chunk({"role": "assistant", "content": "O"}), b"data: \n\n"]), None),
    ],
    ids=["keep-alives", "a-page", "an-error-event", "a-blank-data-line"],
)
def test_a_connection_test_reads_the_reply_as_a_turn_does(
    deadline_env: Env, reply: Replay, error: str | None
) -> None:
    """The connection test read the stream through the SDK: keep-alives held its request
    for ever, a proxy's sign-in page or an error event passed for a working model, and a
    blank data line answered 500."""
    env = deadline_env
    env.model.script(reply)
    resp = env.api("POST", f"/api/models/{MOCK_LLM_PROVIDER_ID}/test")
    assert resp.status_code == 200, resp.text
    result = resp.json()
    assert result["ok"] is (error is None), result
    if error is not None:
        assert error in result["error"]


@pytest.mark.parametrize("reason", ["abort", "error", "insufficient_system_resource"])
def test_a_reply_the_provider_cut_short_is_not_taken_for_a_whole_one(env: Env, reason: str) -> None:
    """vLLM ends an engine-aborted request with finish reason 'abort', OpenRouter an error
    mid-generation with 'error', DeepSeek one it lacked the resources for with
    'insufficient_system_resource': each with a 200 and [DONE], and the text so far was
    stored as the answer."""
    session = new_session()
    reply = Replay([chunk({"role": "assistant", "content": "The answer is"}), chunk({}, reason)])
    failed(env.turn("hi", session, reply), f"finish reason {reason!r}")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_a_connection_test_of_a_model_that_refuses_max_tokens_asks_again(env: Env) -> None:
    """OpenAI's reasoning models (o1, o3, GPT-5) refuse ``max_tokens``, naming the field
    they take instead: the connection test of a working model failed."""
    refused = {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
    env.model.script(Replay(status=400, body={"error": refused}), text_reply("OK"))
    before = len(env.model.requests)
    resp = env.api("POST", f"/api/models/{MOCK_LLM_PROVIDER_ID}/test")
    assert resp.status_code == 200, resp.text
    assert resp.json()["ok"] is True, resp.json()
    first, second = env.model.requests[before:]
    assert first["max_tokens"] == 1
    assert second["max_completion_tokens"] == 1 and "max_tokens" not in second


def test_a_reply_with_more_calls_than_the_cap_fails_and_runs_none(env: Env) -> None:
    """Calls of a few bytes each hardly count against the reply's character cap: a
    provider that opened call after call made the server hold, then run, every one."""
    session = new_session()
    many = [fn("no_such_tool", "{}", index=n, id=f"c{n}") for n in range(MAX_CALLS_PER_REPLY + 1)]
    reply = Replay([calls_chunk(*many), chunk({}, "tool_calls")])
    before = len(env.model.requests)
    failed(env.turn("hi", session, reply), f"more than {MAX_CALLS_PER_REPLY:,} tool calls")
    # No call stored, none run (their results would have gone back to the model).
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    assert len(env.model.requests) == before + 1
    env.next_message_works(session)


@pytest.mark.parametrize("streamed", [True, False], ids=["in-a-stream", "as-the-body"])
def test_an_error_list_answered_with_200_is_told_in_the_provider_s_words(
    env: Env, streamed: bool
) -> None:
    """Gemini words its errors as a list of error objects; with a 200, in a stream or as
    the whole body, it was 'a stream line that is not a JSON object'."""
    session = new_session()
    said = [
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    ]
    reply = (
        Replay([chunk({"role": "assistant", "content": "Let"}), sse(said)])
        if streamed
        else Replay(body=said)
    )
    failed(env.turn("hi", session, reply), "reported an error: The model is overloaded.")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_an_error_answer_whose_body_never_ends_is_cut_and_told(env: Env) -> None:
    """The SDK reads an error answer's body whole before it raises: one that never ended
    held the turn, and the server held all of it."""
    session = new_session()
    endless = Replay(
        status=400,
        body=b'{"error": {"message": "bad request"}} ',
        headers={"Content-Type": "text/plain"},
        keep_alive=b"x" * 65_536,
    )
    failed(env.turn("hi", session, endless), "answered 400: {")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def _bomb(encoding: str, inflated: int) -> bytes:
    """An error object followed by ``inflated`` bytes of blanks (still valid JSON),
    compressed about a thousand to one."""
    wbits = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS, "raw-deflate": -15}
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits[encoding])
    parts = [packer.compress(b'{"error": {"message": "bad request"}}')]
    blanks = b" " * (1 << 20)
    parts += [packer.compress(blanks) for _ in range(inflated // len(blanks))]
    return b"".join([*parts, packer.flush()])


def _peak_rss(pid: int, reset: bool = False) -> int:
    """The process's resident set at its highest (VmHWM) since the last reset, in bytes."""
    if reset:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM:")).split()[1]) * 1024


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_error_answer_is_cut_as_inflated(env: Env, encoding: str) -> None:
    """An error body that inflates about a thousand to one: 60 KiB of gzip, under the cut
    on the bytes as sent, inflated to 60 MiB, all held by the server while the SDK read
    it."""
    session = new_session()
    bomb = _bomb(encoding, 60 << 20)
    assert len(bomb) < 64 * 1024
    sent_as = "deflate" if encoding == "raw-deflate" else encoding
    headers = {"Content-Type": "application/json", "Content-Encoding": sent_as}
    env.next_message_works(new_session())  # the SDK loaded and its client made: not measured
    pid = env.server.proc.pid
    before = _peak_rss(pid, reset=True)
    task = env.turn("hi", session, Replay(status=400, body=bomb, headers=headers))
    grown = _peak_rss(pid) - before
    failed(task, "answered 400: bad request")
    assert grown < 16 << 20, f"the server grew by {grown >> 20} MiB"
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_an_error_answer_in_an_encoding_that_cannot_be_bounded_is_not_read(env: Env) -> None:
    session = new_session()
    headers = {"Content-Type": "application/json", "Content-Encoding": "br"}
    reply = Replay(status=400, body=b"\x1b\x00\x00 not read", headers=headers)
    failed(env.turn("hi", session, reply), "answered 400: no details given")
    env.next_message_works(session)


def _filtered() -> bytes:
    """Azure's last chunk of a reply its content filter stopped: no delta text, finish
    reason 'content_filter', the category that was filtered."""
    results = {"violence": {"filtered": True, "severity": "medium"}}
    choice = {"index": 0, "delta": {}, "finish_reason": "content_filter"}
    body = {"id": "chatcmpl-f", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return sse({**body, "choices": [{**choice, "content_filter_results": results}]})


@pytest.mark.parametrize("with_call", [False, True], ids=["text", "text-and-call"])
def test_a_reply_the_content_filter_cut_after_some_text_is_not_taken_whole(
    env: Env, with_call: bool
) -> None:
    """Azure stops a reply its filter flags mid-way, finish reason 'content_filter' on
    the last chunk and [DONE]: the text so far was stored as the whole answer (and a
    call before it run)."""
    session = new_session()
    pieces = [chunk({"role": "assistant", "content": "Step one is to "})]
    if with_call:
        pieces.append(calls_chunk(fn(SHELL, shell_args("echo never"), index=0, id="cf1")))
    reply = Replay([*pieces, _filtered()])
    failed(env.turn("hi", session, reply), "the provider's content filter cut the model's reply")
    assert env.payloads(session) == [{"role": "user", "content": "hi"}]
    env.next_message_works(session)


def test_a_reply_the_content_filter_cut_keeps_its_text_on_the_chat_stream(env: Env) -> None:
    """QwenPaw's stream ends the response failed, saying why, with the text so far in its
    output (its message marked completed, as QwenPaw marks a failed turn's text)."""
    session = new_session()
    env.model.script(
        Replay([chunk({"role": "assistant", "content": "Step one is to "}), _filtered()])
    )
    with env.server._client.stream(
        "POST",
        "/api/console/chat",
        json=chat_body("hi", session),
        headers={"Authorization": f"Bearer {env.server.token}"},
    ) as resp:
        assert resp.status_code == 200
        response = [e.data for e in sse_events(resp.iter_lines())][-1]
    assert response["status"] == "failed"
    assert "content filter cut the model's reply" in response["error"]["message"]
    (message,) = response["output"]
    assert (message["status"], message["content"][0]["text"]) == ("completed", "Step one is to ")
