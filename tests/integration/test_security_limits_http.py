"""Limits: tool calls in flight per session (a tool error the model reads) and output
stored per call. Bursts against the task and call limits are in
test_security_limits_burst_http.py; /api/healthz under load is timed in
bench/bench_busy_healthz.py (a timing assertion has no place on a loaded CI machine)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from core_support import temporary_server
from security_support import (
    call_ids,
    finished_task,
    mock_model,
    output_text,
    submit,
    tool_reply,
    use_model,
)

pytestmark = [pytest.mark.integration, pytest.mark.p1]


@pytest.fixture(scope="module")
def limited() -> Iterator[Any]:
    with temporary_server(
        "limits",
        TETHER_MAX_CALLS_PER_SESSION="1",
        TETHER_OUTPUT_STORE_BYTES="8192",
    ) as srv:
        yield srv


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
