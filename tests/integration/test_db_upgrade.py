"""A SQLite database written by an earlier main (hand-rolled `_migrations`) upgrades
through Alembic with nothing lost; `tether serve` refuses it until then.

The fixture is a `.dump` of the store a real server from main (53d64c6) wrote: a
provider with a sealed key (its `secret.key` beside it), a session whose turn ran a
shell call, and a cron job.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_support import AppServer, FakeModel, Stack, chat_body

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parent / "fixtures" / "main_2026_12_01"
SESSION = "legacy-session"
CALL = "call_52830a0183d9ac59a50651ce"


@pytest.fixture
def legacy_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    shutil.copy(FIXTURE / "secret.key", home / "secret.key")
    with sqlite3.connect(home / "tether.db") as conn:
        conn.executescript((FIXTURE / "tether.sql").read_text())
    conn.close()
    yield home


def _tether(server: AppServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", *args],
        env=server._env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _tables(home: Path) -> set[str]:
    with sqlite3.connect(home / "tether.db") as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    conn.close()
    return {name for (name,) in rows}


def test_serve_refuses_then_db_upgrade_keeps_everything(legacy_home: Path) -> None:
    url = f"sqlite+aiosqlite:///{legacy_home / 'tether.db'}"
    server = AppServer(
        legacy_home,
        {"TETHER_DATABASE_URL": url, "TETHER_DEFAULT_APPROVAL_LEVEL": "off"},
    )
    model = FakeModel()
    try:
        refused = _tether(server, "serve", "--port", str(server.port))
        assert refused.returncode != 0
        assert "tether db upgrade" in refused.stderr, refused.stderr
        assert "_migrations" in _tables(legacy_home), "a refused start changed the database"

        upgraded = _tether(server, "db", "upgrade")
        assert upgraded.returncode == 0, upgraded.stderr
        assert "_migrations" not in _tables(legacy_home)
        assert "alembic_version" in _tables(legacy_home)
        again = _tether(server, "db", "upgrade")
        assert again.returncode == 0, again.stderr

        server.start()
        _assert_kept(Stack(server, model))
    finally:
        server.close()
        model.close()


def _assert_kept(stack: Stack) -> None:
    call = stack.call(SESSION, CALL)
    assert (call["tool_name"], call["end_state"]) == ("execute_shell_command", "success")
    output = stack.api("GET", f"/api/tool-calls/{SESSION}/{CALL}/output")
    assert "hello-from-main" in output.text
    job = stack.api("GET", "/api/cron/jobs/legacy-job")
    assert job.status_code == 200, job.text
    assert job.json()["spec"]["name"] == "nightly report"
    # The provider's sealed key still opens (a turn needs it) and the history is whole:
    # the model receives the old turn before the new message.
    configured = stack.api(
        "PUT", "/api/models/integ-mock-llm/config", json={"base_url": stack.model.url}
    )
    assert configured.status_code == 200, configured.text
    assert configured.json()["has_api_key"] is True
    resp = stack.api("POST", "/api/console/chat/task", json=chat_body("and now?", SESSION))
    assert resp.status_code == 200, resp.text
    task = stack.wait_task(resp.json()["task_id"])
    assert task["result"]["status"] == "completed", task
    sent: list[dict[str, Any]] = stack.model.requests[-1]["messages"]
    assert any("hello-from-main" in str(m.get("content")) for m in sent if m["role"] == "tool")
    assert sent[-1]["role"] == "user"
