"""Hostile input at the HTTP edge, against a real server: an endless request head, and
text that is not valid Unicode from the model, its tool calls and clients."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from core_support import SHELL, Stack, chat_body, new_session, stack_for_module, wait_for
from cron_support import agent_job

from database_support import on_postgresql

pytestmark = [pytest.mark.integration, pytest.mark.p1]

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("edge")


def _send_endless_header(port: int, limit: int) -> tuple[int, bytes]:
    """Send one header line that never ends, up to ``limit`` bytes or until the server
    hangs up. Returns (bytes sent, what the server answered)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /api/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
        chunk = b"a" * 65536
        try:
            while sent < limit:
                sock.sendall(chunk)
                sent += len(chunk)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            answer = sock.recv(4096)
        except ConnectionResetError:
            answer = b""
    return sent, answer


def test_an_endless_header_line_is_refused_without_growing_the_server(stack: Stack) -> None:
    server = stack.server
    assert stack.api("GET", "/api/chats").status_code == 200
    process = psutil.Process(server.proc.pid)
    before = process.memory_info().rss
    limit = 48 * MiB
    sent, answer = _send_endless_header(server.port, limit)
    # The server hung up long before the end (what was sent beyond its limit sat in
    # socket buffers), answering 431 unless the reset overtook the answer.
    assert sent < limit
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    grown = process.memory_info().rss - before
    assert grown < 8 * MiB, f"server grew by {grown / MiB:.1f} MiB"
    assert stack.api("GET", "/api/chats").status_code == 200
    assert "Traceback" not in server.logs_tail(100_000)


def test_a_head_over_the_limit_gets_431(stack: Stack) -> None:
    head = _head(b"X-Big: " + b"b" * 70_000 + b"\r\n")
    with socket.create_connection(("127.0.0.1", stack.server.port), timeout=30) as sock:
        try:
            sock.sendall(head)
            answer = sock.recv(4096)
        except ConnectionResetError:
            answer = b""
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def _head(extra: bytes = b"") -> bytes:
    return b"GET /api/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + b"\r\n"


class _Responses:
    """Whole HTTP/1.1 responses read off one kept-alive socket (head, then a body of
    Content-Length bytes), however the bytes are split across reads."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def _fill(self) -> bool:
        chunk = self._sock.recv(65536)
        self._buffer += chunk
        return bool(chunk)

    def next_status(self) -> bytes:
        """The status line of the next whole response (b"" if the server closed)."""
        while b"\r\n\r\n" not in self._buffer:
            if not self._fill():
                return b""
        head, _, rest = self._buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(rest) < length:
            if not self._fill():
                return b""
            rest = self._buffer.partition(b"\r\n\r\n")[2]
        self._buffer = rest[length:]
        return head.split(b"\r\n", 1)[0]


def test_the_limit_counts_each_request_of_a_kept_alive_connection(stack: Stack) -> None:
    big = b"X-Big: " + b"b" * 60_000 + b"\r\n"  # under the limit alone, over it twice
    with socket.create_connection(("127.0.0.1", stack.server.port), timeout=30) as sock:
        responses = _Responses(sock)
        sock.sendall(_head() + _head(big) + _head())  # pipelined
        for _ in range(3):
            assert responses.next_status().startswith(b"HTTP/1.1 200 ")
        sock.sendall(_head(big))
        assert responses.next_status().startswith(b"HTTP/1.1 200 ")
        sock.sendall(_head(big + big))
        try:
            answer = responses.next_status()
        except ConnectionResetError:
            answer = b""
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def test_large_heads_under_the_limit_still_work(stack: Stack) -> None:
    # Many headers, together close to the limit, arrive in several reads.
    headers = {f"X-Filler-{i}": "f" * 1000 for i in range(50)}
    resp = stack.api("GET", "/api/chats", headers=headers)
    assert resp.status_code == 200
    url = "/api/chats?" + "&".join(f"p{i}={'q' * 1000}" for i in range(10))
    assert stack.api("GET", url).status_code == 200


HALF_EMOJI = "\ud83d"  # the first half of a surrogate pair, alone: not valid Unicode
REPLACEMENT = "\ufffd"


def _json_bytes(value: Any) -> bytes:
    # json.dumps escapes the lone surrogate (\ud83d), as a hostile client would send it.
    return json.dumps(value).encode()


def _assert_every_read_answers(stack: Stack, session_id: str, task_id: str) -> None:
    for path in (
        f"/api/console/chat/task/{task_id}",
        f"/api/chats/{session_id}/messages",
        "/api/chats",
        f"/api/tool-calls/{session_id}",
    ):
        resp = stack.api("GET", path)
        assert resp.status_code == 200, (path, resp.text[:300])
        assert HALF_EMOJI not in resp.text


def test_half_an_emoji_in_an_answer_becomes_a_replacement_character(stack: Stack) -> None:
    session_id = new_session()
    stack.model.script({"text": f"half {HALF_EMOJI} an emoji"})
    task_id = stack.submit("say something broken", session_id)
    task = stack.wait_task(task_id)
    assert task["result"]["status"] == "completed", task
    _assert_every_read_answers(stack, session_id, task_id)
    (answer,) = [m for m in stack.messages(session_id) if m["kind"] == "assistant"]
    assert answer["message"]["content"] == f"half {REPLACEMENT} an emoji"


@pytest.mark.parametrize("escaped", [True, False], ids=["escaped-in-arguments", "raw"])
def test_half_an_emoji_in_tool_arguments_becomes_a_replacement_character(
    stack: Stack, escaped: bool
) -> None:
    session_id = new_session()
    command = f"echo half-{HALF_EMOJI}-emoji"
    # Escaped: the arguments string holds the JSON escape, and parsing it makes the
    # surrogate. Raw: the surrogate is in the arguments string itself.
    arguments = json.dumps({"command": command}, ensure_ascii=escaped)
    stack.model.script({"tool_calls": [(SHELL, arguments)]}, {"text": "ran it"})
    task_id = stack.submit("run something broken", session_id)
    task = stack.wait_task(task_id)
    assert task["result"]["status"] == "completed", task
    _assert_every_read_answers(stack, session_id, task_id)
    messages = stack.messages(session_id)
    (call_id,) = [m["message"]["x_tether_call_id"] for m in messages if m["kind"] == "tool"]
    info = stack.call(session_id, call_id)
    assert info["end_state"] == "success"
    assert info["extra"]["arguments"]["command"] == f"echo half-{REPLACEMENT}-emoji"
    output = stack.api("GET", f"/api/tool-calls/{session_id}/{call_id}/output")
    assert output.status_code == 200
    assert f"half-{REPLACEMENT}-emoji" in output.text


def test_half_an_emoji_from_a_client_is_replaced_where_it_enters(stack: Stack) -> None:
    session_id = new_session()
    stack.model.script({"text": "fine"})
    body = chat_body(f"a {HALF_EMOJI} b", session_id)
    resp = stack.api(
        "POST",
        "/api/console/chat/task",
        content=_json_bytes(body),
        headers={"Content-Type": "application/json"},
    )
    assert resp.status_code == 200, resp.text
    task_id = resp.json()["task_id"]
    stack.wait_task(task_id)
    _assert_every_read_answers(stack, session_id, task_id)
    (title,) = [s["name"] for s in stack.api("GET", "/api/chats").json() if s["id"] == session_id]
    assert title == f"a {REPLACEMENT} b"
    # What the model was sent is valid too.
    user = [m for m in stack.model.requests[-1]["messages"] if m["role"] == "user"]
    assert user[-1]["content"] == f"a {REPLACEMENT} b"


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("where", ["cron meta", "cron kept field", "chat input"])
def test_a_body_nested_hundreds_deep_is_422_and_stores_nothing(stack: Stack, where: str) -> None:
    """Parsed, stored, then failing whatever serialised it again: a 500, and the next
    request on the connection was reset."""
    session_id = new_session()
    if where == "chat input":
        path, body = "/api/console/chat/task", chat_body("hi", session_id)
        body["input"][0]["content"][0]["deep"] = _nested(300)
    else:
        path, body = "/api/cron/jobs", agent_job("deep", session_id=session_id)
        if where == "cron meta":
            body["dispatch"]["meta"] = {"m": _nested(300)}
        else:
            body["request"]["extra"] = _nested(300)
    resp = stack.api("POST", path, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["detail"][0]["type"] == "json_too_deep"
    assert stack.api("GET", "/api/cron/jobs/deep").status_code == 404
    assert session_id not in [s["id"] for s in stack.api("GET", "/api/chats").json()]


def test_a_bad_value_already_stored_does_not_break_the_routes(stack: Stack) -> None:
    """A database written before this fix can hold an escaped lone surrogate in a JSON
    column; reading it must not make any route answer 500."""
    session_id = new_session()
    stack.model.script({"text": "stored fine"})
    task_id = stack.submit("plant something", session_id)
    stack.wait_task(task_id)
    if on_postgresql():
        pytest.skip("PostgreSQL refuses such JSON, and no earlier version ran on it")
    with sqlite3.connect(stack.server.home / "tether.db") as db:
        db.execute(
            "UPDATE messages SET payload = ? WHERE session_id = ? AND kind = 'assistant'",
            ('{"role": "assistant", "content": "old \\ud83d value"}', session_id),
        )
        db.execute(
            "UPDATE tasks SET result = ? WHERE id = ?",
            ('{"status": "completed", "text": "\\ud83d"}', task_id),
        )
    _assert_every_read_answers(stack, session_id, task_id)
    (answer,) = [m for m in stack.messages(session_id) if m["kind"] == "assistant"]
    assert answer["message"]["content"] == f"old {REPLACEMENT} value"


def test_a_command_disguised_by_bidi_controls_asks_and_says_why(stack: Stack) -> None:
    """Shows as one echo; bash would run the rm. At level auto it waits for a person,
    with a HIGH finding naming the hidden characters."""
    notes = stack.workspace / "notes.txt"
    notes.write_text("keep me")
    session_id = new_session()
    stack.model.script(
        {
            "tool_calls": [
                (SHELL, json.dumps({"command": 'echo "ok\u2067"; rm ./notes.txt; #\u2069'}))
            ]
        },
        {"text": "not run"},
    )
    body = chat_body("tidy up", session_id, request_context={"approval_level": "auto"})
    resp = stack.api("POST", "/api/console/chat/task", json=body)
    assert resp.status_code == 200, resp.text
    task_id = resp.json()["task_id"]

    def pending() -> list[dict[str, Any]]:
        listed = stack.api("GET", f"/api/approval/list?session_id={session_id}").json()
        return list(listed["pending_approvals"])

    (request,) = wait_for(pending, what="the approval request")
    (finding,) = [f for f in request["findings"] if f["rule_id"] == "text-bidi-control"]
    assert finding["severity"] == "HIGH"
    assert "U+2067 RIGHT-TO-LEFT ISOLATE" in finding["description"]
    assert "U+2069 POP DIRECTIONAL ISOLATE" in finding["description"]
    resp = stack.api(
        "POST",
        "/api/approval/deny",
        json={"request_id": request["request_id"], "session_id": session_id},
    )
    assert resp.status_code == 200, resp.text
    assert stack.wait_task(task_id)["result"]["status"] == "completed"
    assert notes.read_text() == "keep me"


@pytest.mark.parametrize(
    "session_id",
    ["a/b", "x/messages", "a\x00b", "tab\there", "nl\n", "..", ".", "x\u202eevil", "  "],
)
def test_a_session_id_no_route_could_reach_is_422_and_creates_nothing(
    stack: Stack, session_id: str
) -> None:
    """A chat or task with "/" in its session id was created, then 404 on every route
    that names the session (its calls could not be listed, read or cancelled)."""
    chats_before = stack.api("GET", "/api/chats").json()
    made = stack.api("POST", "/api/chats", json={"session_id": session_id, "user_id": "u"})
    assert made.status_code == 422, made.text
    asked = stack.api("POST", "/api/console/chat/task", json=chat_body("hi", session_id))
    assert asked.status_code == 422, asked.text
    assert "session id" in asked.text
    assert stack.api("GET", "/api/chats").json() == chats_before


@pytest.mark.parametrize("field", [{"user_id": "team/alice"}, {"channel": "a\nb"}])
def test_a_session_id_made_of_channel_and_user_is_held_to_the_same(
    stack: Stack, field: dict[str, str]
) -> None:
    """With no session_id the session is "<channel>:<user_id>": 'console:team/alice'
    passed where 'team/alice' as a session id did not."""
    body = chat_body("hi", "unused") | field
    body.pop("session_id")
    resp = stack.api("POST", "/api/console/chat/task", json=body)
    assert resp.status_code == 422, resp.text
    assert "session id" in resp.text
