"""The log at debug level: no chat text, tool output, SQL parameters or secrets, and
every line in Tether's one-line format (the HTTP server's own lines included)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from core_support import temporary_server
from security_support import finished_task, mock_model, submit, tool_reply, use_model

pytestmark = [pytest.mark.integration, pytest.mark.p0]

CHAT = f"chat-canary-{uuid.uuid4().hex}"
TOOL_OUTPUT = f"tool-canary-{uuid.uuid4().hex}"
REPLY = f"reply-canary-{uuid.uuid4().hex}"
PROVIDER_KEY = f"sk-canary-{uuid.uuid4().hex}"
# One record per line: time, level, logger, message.
RECORD = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: "
)


@pytest.fixture(scope="module")
def log_text() -> Iterator[tuple[str, Any]]:
    """The whole log of a debug-level server that ran one turn with a tool call."""
    with temporary_server("logs", TETHER_LOG_LEVEL="debug") as server:
        with mock_model() as (model, url):
            use_model(server, url, api_key=PROVIDER_KEY)
            # The tool prints the canary without the command holding it verbatim.
            command = f"echo {TOOL_OUTPUT[:20]}''{TOOL_OUTPUT[20:]}"
            model.replies = [
                tool_reply(("execute_shell_command", {"command": command})),
                {"text": REPLY},
            ]
            task_id, _ = submit(server, CHAT)
            task = finished_task(server, task_id)
            result = task["result"]
            assert (result["status"], result["text"], result["steps"]) == ("completed", REPLY, 2)
            tool_message = next(m for m in task["messages"] if m["role"] == "tool")
            assert TOOL_OUTPUT in tool_message["content"]  # the canary really was output
        server.stop()  # the shutdown lines too
        yield server.log_path.read_text(errors="replace"), server


def test_the_log_holds_no_content_and_no_secret(log_text: tuple[str, Any]) -> None:
    text, server = log_text
    for canary in (CHAT, TOOL_OUTPUT, REPLY, PROVIDER_KEY, server.token):
        assert canary not in text, f"{canary[:16]}... is in the log"
    assert "INSERT INTO" not in text  # no SQL statement, so no SQL parameters
    assert " DEBUG tether." in text  # the server really logged at debug level


def test_every_log_line_is_a_tether_record(log_text: tuple[str, Any]) -> None:
    text, _ = log_text
    lines = text.splitlines()
    # The one line that is not a record: `tether serve` telling where the console is.
    banner = [line for line in lines if line.startswith("Tether ") and " console: " in line]
    assert len(banner) == 1
    others = [line for line in lines if line not in banner]
    assert any("uvicorn" in line for line in others)  # the HTTP server's lines are here
    assert [line for line in others if not RECORD.match(line)] == []
