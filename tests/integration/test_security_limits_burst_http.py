"""Limits under a burst: requests that arrive together get exactly the limit admitted.

A limit checked in one place and taken after an await lets a burst through (every
request passes the check before any registers); these tests send their requests at the
same time, with real concurrent connections, and count what got in.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from core_support import SHELL, gated, temporary_server
from security_support import SlowModelHandler, finished_task, mock_model, use_model, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.p1]

BURST = 12
GATE = "burst-gate"


def _body(session_id: str) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "input": [{"role": "user", "content": "hi"}],
        "request_context": {"approval_level": "off"},
    }


def burst(server: Any, path: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """POST every body at once, each on its own connection; the responses in order."""

    async def send_all() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=len(bodies))
        headers = {"Authorization": f"Bearer {server.token}"}
        async with httpx.AsyncClient(
            base_url=server.base_url, headers=headers, limits=limits, timeout=30
        ) as client:
            return await asyncio.gather(*(client.post(path, json=b) for b in bodies))

    return asyncio.run(send_all())


@pytest.fixture(scope="module")
def two_tasks() -> Iterator[Any]:
    with temporary_server("burst-tasks", TETHER_MAX_CONCURRENT_TASKS="2") as srv:
        yield srv


@pytest.fixture(scope="module")
def three_calls() -> Iterator[Any]:
    with temporary_server("burst-calls", TETHER_MAX_CALLS_TOTAL="3") as srv:
        yield srv


def test_a_burst_of_tasks_gets_exactly_the_limit_admitted(two_tasks: Any) -> None:
    with mock_model(SlowModelHandler) as (model, url):
        use_model(two_tasks, url)
        sessions = [f"burst-{uuid.uuid4().hex[:8]}" for _ in range(BURST)]
        responses = burst(two_tasks, "/api/console/chat/task", [_body(s) for s in sessions])
        codes = [r.status_code for r in responses]
        assert sorted(codes) == [200] * 2 + [429] * (BURST - 2), codes
        refused = [s for s, r in zip(sessions, responses, strict=True) if r.status_code == 429]
        details = {r.json()["detail"] for r in responses if r.status_code == 429}
        assert details == {"2 tasks are already running; try again later"}
        wait_for(lambda: model.arrived >= 2, what="the admitted turns to reach the model")
        # The streaming route shares the limit.
        resp = two_tasks.api_request("POST", "/api/console/chat", json=_body("burst-stream"))
        assert resp.status_code == 429
        model.release.set()
        for resp in responses:
            if resp.status_code == 200:
                assert finished_task(two_tasks, resp.json()["task_id"])["result"]["status"] == (
                    "completed"
                )
        # Only the admitted turns ever reached the model; refused ones left nothing behind.
        assert model.arrived == 2
        known = {s["session_id"] for s in two_tasks.api_request("GET", "/api/chats").json()}
        assert not known & set(refused)
        # Places free up once the turns end.
        resp = two_tasks.api_request("POST", "/api/console/chat/task", json=_body("burst-after"))
        assert resp.status_code == 200
        finished_task(two_tasks, resp.json()["task_id"])


def _live_count(server: Any, session_id: str) -> int:
    resp = server.api_request("GET", f"/api/tool-calls/{session_id}")
    assert resp.status_code == 200, resp.text
    return len(resp.json()["items"])


def _finished(server: Any, task_id: str) -> bool:
    resp = server.api_request("GET", f"/api/console/chat/task/{task_id}")
    return bool(resp.json()["status"] == "finished")


def test_a_burst_of_calls_gets_exactly_the_server_limit_admitted(three_calls: Any) -> None:
    """Six sessions each call the shell at once; the server takes three calls in total.

    Admitted calls hold on a gate file, so no place frees up during the burst; a refused
    call's turn ends at once (the model reads the refusal and answers)."""
    with mock_model() as (model, url):
        use_model(three_calls, url)
        model.force_tool_call = True
        model.tool_call_name = SHELL
        model.tool_call_arguments = json.dumps({"command": gated(GATE, "echo in", "echo through")})
        sessions = [f"calls-{uuid.uuid4().hex[:8]}" for _ in range(6)]
        responses = burst(three_calls, "/api/console/chat/task", [_body(s) for s in sessions])
        assert [r.status_code for r in responses] == [200] * 6
        tasks = dict(zip(sessions, (r.json()["task_id"] for r in responses), strict=True))

        def settled() -> tuple[int, list[str]] | None:
            # Every turn has either a call in flight or has ended with its refusal.
            live = {s: _live_count(three_calls, s) for s in sessions}
            ended = [s for s in sessions if _finished(three_calls, tasks[s])]
            waiting = [s for s in sessions if not live[s] and s not in ended]
            return None if waiting else (sum(live.values()), ended)

        in_flight, ended = wait_for(settled, 30, "every turn to get its call in or refused")
        assert in_flight == 3
        assert len(ended) == 3
        (three_calls.home / "workspace" / GATE).touch()
        outcomes = []
        for session_id in sessions:
            task = finished_task(three_calls, tasks[session_id])
            (result,) = [m for m in task["messages"] if m["role"] == "tool"]
            outcomes.append("too many tool calls" in result["content"])
        assert sorted(outcomes) == [False] * 3 + [True] * 3
