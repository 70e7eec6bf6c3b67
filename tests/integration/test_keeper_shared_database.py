"""Two servers with two homes on one database: a start takes up only what servers of its
own home left, never a live server's calls (it looked at every unfinished row, and said
of the other server's running call that its process and output were lost)."""

from __future__ import annotations

from pathlib import Path

import pytest
from core_support import FakeModel, Stack, gated, open_gate, start_server
from helpers import register_mock_provider

from database_support import shared_database_url

pytestmark = pytest.mark.integration

GATE = "shared-db-gate"


def test_a_start_leaves_the_calls_of_a_live_server_on_the_same_database(
    tmp_path: Path,
) -> None:
    url = shared_database_url(tmp_path)
    env = {"TETHER_DATABASE_URL": url, "TETHER_DEFAULT_APPROVAL_LEVEL": "off"}
    model = FakeModel()
    first = start_server(tmp_path / "a", **env)
    second = None
    try:
        register_mock_provider(first, model.url)
        stack = Stack(first, model)
        session_id, task_id, call = stack.start_shell(gated(GATE, "echo started", "echo end"))
        call_id = call["tool_call_id"]
        second = start_server(tmp_path / "b", **env)
        said = second.log_path.read_text(errors="replace")
        assert call_id not in said, said[-2000:]
        assert "not adopted" not in said and "could not be recovered" not in said
        assert stack.call(session_id, call_id)["status"] == "running"
        open_gate(stack, GATE)
        assert stack.wait_task(task_id)["status"] == "finished"
        assert stack.call(session_id, call_id)["end_state"] == "success"
    finally:
        if second is not None:
            second.close()
        first.close()
        model.close()
