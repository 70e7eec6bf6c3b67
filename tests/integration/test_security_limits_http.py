"""Limits: concurrent tasks (429), tool calls in flight per session (a tool error the
model reads), output stored per call, and a server that stays responsive under load."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from core_support import temporary_server
from security_support import (
    SlowModelHandler,
    call_ids,
    finished_task,
    mock_model,
    output_text,
    start_server,
    submit,
    tool_reply,
    use_model,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.p1]


@pytest.fixture(scope="module")
def limited() -> Iterator[Any]:
    with temporary_server(
        "limits",
        TETHER_MAX_CONCURRENT_TASKS="2",
        TETHER_MAX_CALLS_PER_SESSION="1",
        TETHER_OUTPUT_STORE_BYTES="8192",
    ) as srv:
        yield srv


def _task_body() -> dict[str, Any]:
    return {
        "session_id": f"limit-{uuid.uuid4().hex[:8]}",
        "input": [{"role": "user", "content": "hi"}],
    }


def test_tasks_past_the_limit_get_429(limited: Any) -> None:
    with mock_model(SlowModelHandler) as (model, url):
        use_model(limited, url)
        first, _ = submit(limited, "one")
        second, _ = submit(limited, "two")
        wait_for(lambda: model.arrived >= 2, what="both turns to reach the model")
        body = _task_body()
        resp = limited.api_request("POST", "/api/console/chat/task", json=body)
        assert resp.status_code == 429
        assert "2 tasks are already running" in resp.json()["detail"]
        sessions = limited.api_request("GET", "/api/chats").json()
        assert body["session_id"] not in {s["session_id"] for s in sessions}
        # The streaming chat route shares the limit.
        resp = limited.api_request("POST", "/api/console/chat", json=_task_body())
        assert resp.status_code == 429
        model.release.set()
        for task_id in (first, second):
            assert finished_task(limited, task_id)["result"]["status"] == "completed"
        resp = limited.api_request("POST", "/api/console/chat/task", json=_task_body())
        assert resp.status_code == 200
        # Let it end here: a turn left running would take the next test's scripted replies.
        finished_task(limited, resp.json()["task_id"])


def test_tool_calls_past_the_session_limit_become_a_tool_error(limited: Any) -> None:
    with mock_model() as (model, url):
        use_model(limited, url)
        model.replies = [
            tool_reply(
                ("execute_shell_command", {"command": "sleep 2"}),
                ("execute_shell_command", {"command": "echo never"}),
            ),
            {"text": "ok"},
        ]
        task_id, session_id = submit(limited, "two at once")
        assert finished_task(limited, task_id)["result"]["status"] == "completed"
        tool_messages = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 2
    refused = [m for m in tool_messages if "too many tool calls are in flight" in m["content"]]
    assert len(refused) == 1
    # Only the admitted call exists as a call; the refused one never started.
    assert len(call_ids(limited, session_id)) == 2
    infos = [
        limited.api_request("GET", f"/api/tool-calls/{session_id}/{cid}")
        for cid in call_ids(limited, session_id)
    ]
    assert sorted(r.status_code for r in infos) == [200, 404]


def test_output_past_the_store_limit_is_dropped_with_a_note(limited: Any) -> None:
    with mock_model() as (model, url):
        use_model(limited, url)
        command = "head -c 200000 /dev/zero | tr '\\0' x"
        model.replies = [
            tool_reply(("execute_shell_command", {"command": command})),
            {"text": "ok"},
        ]
        task_id, session_id = submit(limited, "print a lot")
        assert finished_task(limited, task_id)["result"]["status"] == "completed"
    (call_id,) = call_ids(limited, session_id)
    text = output_text(limited, session_id, call_id)
    assert text.count("x") == 8192
    assert "output limit of 8192 bytes reached" in text
    info = limited.api_request("GET", f"/api/tool-calls/{session_id}/{call_id}").json()
    assert info["end_state"] == "success"


def test_healthz_stays_fast_under_200_running_tasks(tmp_path: Path) -> None:
    """A functional check with a generous margin (not a benchmark): 200 turns wait on a
    slow model while /api/healthz is timed."""
    server = start_server(tmp_path / "home")
    try:
        with mock_model(SlowModelHandler) as (model, url):
            use_model(server, url)
            with httpx.Client(base_url=server.base_url, timeout=30) as client:
                for _ in range(200):
                    resp = client.post(
                        "/api/console/chat/task",
                        json=_task_body(),
                        headers={"Authorization": f"Bearer {server.token}"},
                    )
                    assert resp.status_code == 200, resp.text
                wait_for(lambda: model.arrived >= 200, 60, "200 turns to reach the model")
                timings = []
                for _ in range(30):
                    start = time.perf_counter()
                    assert client.get("/api/healthz").status_code == 200
                    timings.append(time.perf_counter() - start)
            model.release.set()
        assert statistics.median(timings) < 0.1, timings
        assert max(timings) < 0.5, timings
    finally:
        server.close()
