"""Helpers for integration tests: an OpenAI-compatible fake model and provider set-up.

The conformance suite imports the names in ``__all__`` from here.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import (
    Choice,
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)

__all__ = [
    "MOCK_LLM_PROVIDER_ID",
    "MockLLMHandler",
    "default_http_timeout",
    "host_pid",
    "register_mock_provider",
    "unregister_mock_provider",
]

MOCK_LLM_PROVIDER_ID = "integ-mock-llm"
MOCK_MODEL = "mock-model"
MOCK_TEXT = "Done: the mock model has the tool result."


def default_http_timeout(seconds: float) -> float:
    """A request timeout, scaled by TETHER_TEST_TIMEOUT_SCALE on slow machines."""
    return seconds * float(os.environ.get("TETHER_TEST_TIMEOUT_SCALE", "1"))


def _chunk(delta: ChoiceDelta, finish: str | None = None) -> str:
    chunk = ChatCompletionChunk(
        id="chatcmpl-mock",
        object="chat.completion.chunk",
        created=int(time.time()),
        model=MOCK_MODEL,
        choices=[Choice(index=0, delta=delta, finish_reason=finish)],  # type: ignore[arg-type]
    )
    # json.dumps rather than model_dump_json: it writes what a provider may send but
    # pydantic refuses to encode (an unpaired surrogate such as U+D83D, escaped).
    data = json.dumps(chunk.model_dump(mode="json", exclude_none=True), separators=(",", ":"))
    return f"data: {data}\n\n"


def text_frames(text: str, reasoning: str = "") -> list[str]:
    """SSE frames of an assistant text reply, a few words per chunk, after its reasoning
    (sent as DeepSeek and vLLM do, in ``reasoning_content``) if there is any."""
    words = text.split(" ")
    frames = [_chunk(ChoiceDelta(role="assistant", content=""))]
    if reasoning:
        frames.append(_chunk(ChoiceDelta(reasoning_content=reasoning)))  # type: ignore[call-arg]
    frames += [_chunk(ChoiceDelta(content=(w if i == 0 else " " + w))) for i, w in enumerate(words)]
    frames.append(_chunk(ChoiceDelta(), "stop"))
    return frames


def tool_call_frames(calls: list[tuple[str, str]], ids: list[str] | None = None) -> list[str]:
    """SSE frames of an assistant reply calling each (name, arguments) in order, with the
    given call ids (made up when not given)."""
    frames = [_chunk(ChoiceDelta(role="assistant"))]
    for index, (name, arguments) in enumerate(calls):
        call_id = ids[index] if ids else f"call_{uuid.uuid4().hex[:12]}"
        head = ChoiceDeltaToolCall(
            index=index,
            id=call_id,
            type="function",
            function=ChoiceDeltaToolCallFunction(name=name, arguments=""),
        )
        frames.append(_chunk(ChoiceDelta(tool_calls=[head])))
        # Arguments arrive in two pieces, as real providers split them.
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            part = ChoiceDeltaToolCall(
                index=index, function=ChoiceDeltaToolCallFunction(arguments=piece)
            )
            frames.append(_chunk(ChoiceDelta(tool_calls=[part])))
    frames.append(_chunk(ChoiceDelta(), "tool_calls"))
    return frames


class ModelHTTPServer(ThreadingHTTPServer):
    """A fake provider's server that takes a burst of connections, as real ones do.

    Turns of many sessions reach the model together (a hundred tasks started at once,
    or resumed after a restart); the standard library's backlog of 5 refused most of
    them, and the turns failed "could not be reached"."""

    request_queue_size = 1024
    daemon_threads = True


class MockLLMHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible streaming chat endpoint driven by attributes of its server.

    - ``force_error``: answer 500.
    - ``force_tool_call``: when tools are offered and no tool result is in the request,
      stream a call of ``tool_call_name`` with ``tool_call_arguments``; otherwise text.
    - ``replies`` (optional list): scripted replies taken first, each a dict with one of
      ``text`` (with optional ``reasoning``), ``tool_calls`` ([(name, arguments)], with
      optional ``ids`` the model gives them),
      ``status`` (error code) or ``broken`` (stream cut mid-way).
    Every request body is appended to ``requests`` (created on first use).
    """

    # HTTP/1.0: one request per connection. The suite serves this handler from a
    # single-threaded HTTPServer, which a kept-alive connection would monopolise.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        srv: Any = self.server
        with _lock:
            if not hasattr(srv, "requests"):
                srv.requests = []
            srv.requests.append(body)
        if not self.path.endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        reply = self._next_reply(srv, body)
        if "status" in reply:
            message = reply.get("message", "mock failure")
            self._json(reply["status"], {"error": {"message": message, "type": "mock"}})
            return
        if "text" in reply:
            frames = text_frames(reply["text"], reply.get("reasoning", ""))
            self._stream(frames, broken=reply.get("broken", False))
        else:
            self._stream(tool_call_frames(reply["tool_calls"], reply.get("ids")))

    def _next_reply(self, srv: Any, body: dict[str, Any]) -> dict[str, Any]:
        with _lock:
            scripted = getattr(srv, "replies", None)
            if scripted:
                return dict(scripted.pop(0))
        if getattr(srv, "force_error", False):
            return {"status": 500, "message": "mock provider exploded"}
        has_result = any(m.get("role") == "tool" for m in body.get("messages", []))
        if getattr(srv, "force_tool_call", False) and body.get("tools") and not has_result:
            return {"tool_calls": [(srv.tool_call_name, srv.tool_call_arguments)]}
        return {"text": MOCK_TEXT}

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, frames: list[str], broken: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if broken:
            # Promise more than is sent, then hang up: a stream cut mid-way.
            payload = "".join(frames[: max(1, len(frames) // 2)]).encode()
            self.send_header("Content-Length", str(len(payload) + 1000))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
            self.close_connection = True
            return
        frames = [*frames, "data: [DONE]\n\n"]
        payload = "".join(frames).encode()
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


_lock = threading.Lock()


class SlowModelHandler(MockLLMHandler):
    """The fake model, holding every request until its server's ``release`` (an Event)
    is set; ``arrived`` counts the requests (under ``arrived_lock``)."""

    def do_POST(self) -> None:
        srv: Any = self.server
        with srv.arrived_lock:
            srv.arrived += 1
        srv.release.wait(120)
        super().do_POST()


def register_mock_provider(
    app_server: Any, url: str, provider_id: str = MOCK_LLM_PROVIDER_ID
) -> str:
    """Add the fake model as a provider through the API and make it active."""
    resp = app_server.api_request(
        "POST",
        "/api/models/custom-providers",
        json={
            "id": provider_id,
            "name": "Integration mock LLM",
            "default_base_url": url,
            "chat_model": "OpenAIChatModel",
            "models": [{"id": MOCK_MODEL, "name": "Mock model"}],
        },
    )
    assert resp.status_code in (201, 409), resp.text
    resp = app_server.api_request(
        "PUT", f"/api/models/{provider_id}/config", json={"api_key": "sk-mock", "base_url": url}
    )
    assert resp.status_code == 200, resp.text
    resp = app_server.api_request(
        "PUT",
        "/api/models/active",
        json={"provider_id": provider_id, "model": MOCK_MODEL, "scope": "global"},
    )
    assert resp.status_code == 200, resp.text
    return provider_id


def unregister_mock_provider(app_server: Any, provider_id: str = MOCK_LLM_PROVIDER_ID) -> None:
    """Remove the fake provider (no error if it is already gone)."""
    resp = app_server.api_request("DELETE", f"/api/models/custom-providers/{provider_id}")
    assert resp.status_code in (200, 404), resp.text


def host_pid(ns_pid: int, call_id: str) -> int | None:
    """The host's number for a process a call knows as ``ns_pid``: inside the sandbox a
    call has its own pid namespace, so what ``$$`` says there is not the host's pid."""
    for proc in psutil.process_iter():
        try:
            if not proc.environ().get("TETHER_TOOL_CALL", "").endswith(f":{call_id}"):
                continue
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except (psutil.Error, OSError):
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == ns_pid:
                return proc.pid
    return None
