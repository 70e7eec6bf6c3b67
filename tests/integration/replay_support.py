"""A raw-SSE replay server: an OpenAI-compatible endpoint that sends exactly the bytes a
real provider was seen to send (its quirks included), the chunk builders to write those
replays, and a real server wired to it. The SDK-typed fake in helpers.py cannot express
a quirk; this one can.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from core_support import Stack, temporary_server
from helpers import register_mock_provider

from strict_order import request_problems

SHELL = "execute_shell_command"
# What a provider may get back of its own messages; that no other provider gets them is
# checked by test_another_provider_gets_the_plain_history.
ECHO_FIELDS: dict[str, Any] = {
    "message_fields": ["reasoning_content", "reasoning"],
    "call_fields": ["extra_content"],
}


@dataclass
class Replay:
    """One answer of the fake provider.

    ``pieces`` are written one by one, each flushed (so a piece may end inside a UTF-8
    character or a JSON escape). ``done`` appends ``data: [DONE]``. ``cut_short`` promises
    more bytes than are sent and hangs up (a connection cut). ``stall`` waits for the
    server's ``release`` event after the pieces (a stream that stops moving).
    ``keep_alive`` is sent after the pieces (or the body) every 50 ms until the client
    hangs up or the server's ``release`` (a stream that never ends, and never goes quiet).
    A ``status``
    other than 200, or a ``body``, answers with them and ``headers`` instead of a stream.
    """

    pieces: list[bytes] = field(default_factory=list)
    done: bool = True
    cut_short: bool = False
    stall: bool = False
    keep_alive: bytes = b""
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def sse(payload: Any) -> bytes:
    """One SSE event carrying ``payload`` as JSON."""
    return f"data: {json.dumps(payload)}\n\n".encode()


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    """An SSE chat.completion.chunk with one choice (``delta`` None: a choice without one)."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if delta is not None:
        choice["delta"] = delta
    body = {"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return sse({**body, "choices": [choice], **extra})


def calls_chunk(*deltas: dict[str, Any]) -> bytes:
    return chunk({"tool_calls": list(deltas)})


def fn(name: str | None = None, arguments: str | None = None, **extra: Any) -> dict[str, Any]:
    """A tool-call delta: ``fn("t", "{}", index=0, id="a")``."""
    function = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}
    return {**extra, **({"function": function} if function else {})}


def text_reply(text: str) -> Replay:
    return Replay([chunk({"role": "assistant", "content": text}), chunk({}, "stop")])


class ReplayModel:
    """The replay server on a thread of its own; ``script`` queues answers in order."""

    def __init__(self) -> None:
        self.srv: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.srv.daemon_threads = True
        self.srv.replies = []
        self.srv.requests = []
        self.srv.lock = threading.Lock()
        self.srv.release = threading.Event()
        self.srv.stalled = threading.Event()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/v1"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def script(self, *replies: Replay) -> None:
        with self.srv.lock:
            self.srv.replies = list(replies)
        self.srv.release.clear()
        self.srv.stalled.clear()

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self.srv.lock:
            return list(self.srv.requests)

    def close(self) -> None:
        self.srv.release.set()
        self.srv.shutdown()
        self.srv.server_close()


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: the body ends when the connection closes, as a stream without a length.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        srv: Any = self.server
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        with srv.lock:
            srv.requests.append(body)
            reply = srv.replies.pop(0) if srv.replies else text_reply("(replay script exhausted)")
        if reply.status != 200 or reply.body is not None:
            self._answer(reply)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        pieces = [*reply.pieces, *([b"data: [DONE]\n\n"] if reply.done else [])]
        if reply.cut_short:
            self.send_header("Content-Length", str(sum(map(len, pieces)) + 1000))
        self.end_headers()
        self._write(pieces)
        if reply.stall:
            srv.stalled.set()
            srv.release.wait(60)
        self._keep_alive(reply)

    def _keep_alive(self, reply: Replay) -> None:
        srv: Any = self.server
        while reply.keep_alive and not srv.release.wait(0.05) and self._write([reply.keep_alive]):
            pass

    def _answer(self, reply: Replay) -> None:
        raw = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        headers = {"Content-Type": "application/json", **reply.headers}
        if not reply.keep_alive:
            headers["Content-Length"] = str(len(raw))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self._write([raw])
        self._keep_alive(reply)

    def _write(self, pieces: Iterable[bytes]) -> bool:
        """Whether the client took them all (it hangs up on a reply it gave up on)."""
        try:
            for piece in pieces:
                self.wfile.write(piece)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True


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

    def requests_checked(self) -> Iterator[None]:
        """Body of an autouse fixture: every request the test caused is one a strict
        provider accepts."""
        before = len(self.model.requests)
        yield
        for body in self.model.requests[before:]:
            problems = request_problems(body["messages"], **ECHO_FIELDS)
            assert not problems, (problems, body["messages"])

    def next_message_works(self, session: str) -> None:
        """The session is healthy: one more message completes with a valid request."""
        task = self.turn("still there?", session, text_reply("yes"))
        assert task["result"] == {
            "status": "completed",
            "text": "yes",
            "steps": 1,
            "session_id": session,
        }
        last = self.model.requests[-1]["messages"]
        assert request_problems(last, **ECHO_FIELDS) == [], last
        assert last[-1] == {"role": "user", "content": "still there?"}


def replay_env(prefix: str, **env: str) -> Iterator[Env]:
    """Body of a module-scoped fixture: a server in a fresh home using the replay model
    (``env``: more settings)."""
    model = ReplayModel()
    settings = {
        "TETHER_LLM_MAX_RETRIES": "1",  # so a 429 is retried once
        "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
        **env,
    }
    try:
        with temporary_server(prefix, **settings) as server:
            register_mock_provider(server, model.url)
            yield Env(server, model)
    finally:
        model.close()


def failed(task: dict[str, Any], words: str) -> str:
    """The task's error, once checked: it failed, says ``words`` and nothing internal."""
    assert task["result"]["status"] == "failed", task["result"]
    error = str(task["result"]["error"]["message"])
    assert words in error
    for internal in ("NoneType", "Traceback", "object has no attribute"):
        assert internal not in error
    return error


def shell_args(command: str) -> str:
    return json.dumps({"command": command})
