"""Two server processes over one database: both really compete for each due tick, it
fires exactly once, and an agent job's run with a tool call in flight is left alone when
the other process restarts (SQLite: the test holds its write lock to make the race).
On PostgreSQL, each due tick fires exactly once."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from core_support import FakeModel, gated, scaled, shell_call, start_server, wait_for
from cron_support import agent_job, create_job, history, once_at, text_job, wait_runs_finished
from helpers import register_mock_provider

from database_support import on_postgresql, shared_database_url

pytestmark = pytest.mark.integration

TEXT_JOBS = [f"shared-{index}" for index in range(5)]
AGENT_JOB = "shared-agent"
JOBS = [*TEXT_JOBS, AGENT_JOB]
GATE = "cron-gate"
CLAIMING = re.compile(r"cron job (\S+): claiming revision (\d+)")
LOST = re.compile(r"cron job (\S+): revision (\d+) was claimed elsewhere")


@dataclass
class Shared:
    db: Path
    servers: list[Any]
    model: FakeModel


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    url = shared_database_url(tmp_path)
    first = start_server(tmp_path / "a", TETHER_DATABASE_URL=url)
    second = None
    try:
        # The jobs exist before the second process starts, so both plan the same ticks
        # from the start and both wake for them: a real race for every claim.
        for job_id in TEXT_JOBS:
            create_job(first, text_job(job_id, "tick", schedule=once_at(4)))
        second = start_server(tmp_path / "b", TETHER_DATABASE_URL=url)
        yield first, second
    finally:
        first.close()
        if second is not None:
            second.close()


@pytest.mark.skipif(not on_postgresql(), reason="on SQLite the test below makes the race")
def test_each_tick_fires_once_across_processes(two_servers: tuple[Any, Any]) -> None:
    first, second = two_servers
    for job_id in TEXT_JOBS:
        (run,) = wait_runs_finished(first, job_id, timeout=20)
        assert (run["trigger"], run["status"]) == ("scheduled", "success")
        messages = second.api_request("GET", f"/api/chats/cron:{job_id}/messages").json()
        assert [m["message"]["content"] for m in messages] == ["tick"]
    # Both processes have long since woken for these ticks; nothing fired twice.
    for job_id in TEXT_JOBS:
        assert len(history(second, job_id)) == 1


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Shared]:
    db = tmp_path / "shared.db"
    env = {
        "TETHER_DATABASE_URL": f"sqlite+aiosqlite:///{db}",
        "TETHER_LOG_LEVEL": "debug",
        "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
        "TETHER_LLM_MAX_RETRIES": "0",
    }
    model = FakeModel()
    servers: list[Any] = []
    try:
        servers.append(start_server(tmp_path / "a", **env))
        register_mock_provider(servers[0], model.url)
        # The provider key is stored encrypted with the home's key file: the second home
        # gets the same file, so whichever process wins the agent job can call the model.
        (tmp_path / "b").mkdir(mode=0o700)
        shutil.copy2(tmp_path / "a" / "secret.key", tmp_path / "b" / "secret.key")
        servers.append(start_server(tmp_path / "b", **env))
        yield Shared(db, servers, model)
    finally:
        for server in servers:
            server.close()
        model.close()


@contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """Hold the database's write lock (readers go on, as in WAL mode they may)."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def claims(server: Any, pattern: re.Pattern[str]) -> set[tuple[str, int]]:
    """(job, revision) of the scheduler's claim lines of ``pattern`` in the server log."""
    return {(m[1], int(m[2])) for m in pattern.finditer(server.logs_tail(10**7))}


@pytest.mark.skipif(on_postgresql(), reason="holds SQLite's write lock to make the race")
def test_both_processes_compete_for_each_tick_and_it_fires_once(shared: Shared) -> None:
    first, second = shared.servers
    shared.model.script(shell_call(gated(GATE, "echo started", "echo finished")), {"text": "done"})
    schedule = once_at(scaled(3))  # one tick for every job
    for job_id in TEXT_JOBS:
        create_job(first, text_job(job_id, "tick", schedule=schedule))
    # Created through the second process, so its scheduler wakes and plans the tick too.
    create_job(second, agent_job(AGENT_JOB, "run the gated command", schedule=schedule))

    # Across the tick, hold the write lock: both schedulers wake, read the due jobs and
    # block on their first claim. Once both are waiting the lock goes, and each process
    # goes on to claim every job it read as due, at the revision it read.
    with write_lock_held(shared.db):
        wait_for(
            lambda: claims(first, CLAIMING) and claims(second, CLAIMING),
            scaled(3) + 20,
            "both schedulers to try a claim",
        )
    for job_id in TEXT_JOBS:
        (run,) = wait_runs_finished(first, job_id, timeout=20)
        assert (run["trigger"], run["status"]) == ("scheduled", "success")
        messages = second.api_request("GET", f"/api/chats/cron:{job_id}/messages").json()
        assert [m["message"]["content"] for m in messages] == ["tick"]
    wait_for(
        lambda: {j for j, _ in claims(first, LOST) | claims(second, LOST)} == set(JOBS),
        what="every job's losing claim",
    )
    # Every job was claimed by both processes at the same revision, and lost by one.
    both = claims(first, CLAIMING) & claims(second, CLAIMING)
    assert {job for job, _ in both} == set(JOBS)
    assert claims(first, LOST).isdisjoint(claims(second, LOST))

    # The agent job's run is in flight in the winner, its tool call waiting on the gate.
    session = f"cron:{AGENT_JOB}"

    def winner() -> Any:
        return next((s for s in shared.servers if _live_calls(s, session)), None)

    runner = wait_for(winner, what="the agent job's tool call")
    other = second if runner is first else first
    (call,) = _live_calls(runner, session)
    # The other process restarts: its start-up recovery leaves the run, the task and the
    # call of a live process alone.
    other.restart()
    (still,) = _live_calls(runner, session)
    assert (still["tool_call_id"], still["status"]) == (call["tool_call_id"], "running")
    (run,) = history(other, AGENT_JOB)
    assert run["status"] == "running"
    (runner.home / "workspace" / GATE).touch()
    (run,) = wait_runs_finished(runner, AGENT_JOB, timeout=20)
    assert (run["trigger"], run["status"], run["error"]) == ("scheduled", "success", None)
    info = runner.api_request("GET", f"/api/tool-calls/{session}/{call['tool_call_id']}").json()
    assert (info["status"], info["end_state"]) == ("completed", "success")
    for job_id in JOBS:
        assert len(history(other, job_id)) == 1


def _live_calls(server: Any, session: str) -> list[dict[str, Any]]:
    resp = server.api_request("GET", f"/api/tool-calls/{session}")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])
