"""Shared pieces of the security integration tests: a fake model that can hold its
answers, turns at approval level off, and reading calls back. Waiting and server start
come from the core suite's support module."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

from core_support import free_port, start_server, wait_for
from helpers import MockLLMHandler, SlowModelHandler, register_mock_provider

__all__ = ["SlowModelHandler", "free_port", "start_server", "wait_for"]  # re-exported


class _ModelServer(ThreadingHTTPServer):
    daemon_threads = True
    # Hundreds of turns may connect at once (the load test); the default backlog of 5
    # would make some wait for a SYN retry.
    request_queue_size = 512


@contextmanager
def mock_model(handler: type[MockLLMHandler] = MockLLMHandler) -> Iterator[tuple[Any, str]]:
    """A fake OpenAI-compatible server in a thread: (server, base URL)."""
    srv: Any = _ModelServer(("127.0.0.1", 0), handler)
    srv.replies = []
    srv.release = threading.Event()
    srv.arrived = 0
    srv.arrived_lock = threading.Lock()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()


def use_model(server: Any, url: str, api_key: str = "sk-mock") -> None:
    """Register the fake model and set its key."""
    register_mock_provider(server, url)
    resp = server.api_request(
        "PUT", "/api/models/integ-mock-llm/config", json={"api_key": api_key, "base_url": url}
    )
    assert resp.status_code == 200, resp.text


def tool_reply(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A scripted model reply calling each (tool, arguments)."""
    return {"tool_calls": [(name, json.dumps(args)) for name, args in calls]}


def submit(server: Any, text: str, session_id: str | None = None) -> tuple[str, str]:
    """Start a turn (approval level off: these tests are about the perimeter behind
    governance); returns (task_id, session_id)."""
    body = {
        "session_id": session_id or f"sec-{uuid.uuid4().hex[:8]}",
        "input": [{"role": "user", "type": "message", "content": text}],
        "request_context": {"approval_level": "off"},
    }
    resp = server.api_request("POST", "/api/console/chat/task", json=body)
    assert resp.status_code == 200, resp.text
    data = resp.json()
    return data["task_id"], data["session_id"]


def finished_task(server: Any, task_id: str, timeout: float = 20.0) -> dict[str, Any]:
    """The task once finished."""

    def probe() -> dict[str, Any] | None:
        task: dict[str, Any] = server.api_request("GET", f"/api/console/chat/task/{task_id}").json()
        return task if task["status"] == "finished" else None

    return wait_for(probe, timeout, f"task {task_id} to finish")


def call_ids(server: Any, session_id: str) -> list[str]:
    """Tether's ids of the tool calls the model made in the session, in order."""
    resp = server.api_request("GET", f"/api/chats/{session_id}/messages")
    assert resp.status_code == 200, resp.text
    return [
        call["x_tether_call_id"]
        for m in resp.json()
        for call in m["message"].get("tool_calls") or []
    ]


def output_text(server: Any, session_id: str, call_id: str) -> str:
    """The stored output of a call."""
    resp = server.api_request("GET", f"/api/tool-calls/{session_id}/{call_id}/output")
    assert resp.status_code == 200, resp.text
    return "".join(part["text"] for part in resp.json()["content"])


def call_info(server: Any, session_id: str, call_id: str) -> dict[str, Any]:
    resp = server.api_request("GET", f"/api/tool-calls/{session_id}/{call_id}")
    assert resp.status_code == 200, resp.text
    info: dict[str, Any] = resp.json()
    return info
