"""Cron jobs across a restart: jobs and history persist, missed ticks run once or are
recorded skipped depending on the job's misfire grace."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from core_support import FakeModel, shell_call, start_server, wait_for
from cron_support import (
    agent_job,
    create_job,
    history,
    once_at,
    text_job,
    wait_runs_finished,
)
from helpers import register_mock_provider

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    running = start_server(tmp_path / "home")
    try:
        yield running
    finally:
        running.close()


def test_restart_keeps_jobs_and_handles_missed_ticks(server: Any) -> None:
    kept = create_job(server, text_job("kept", "still here"))
    assert server.api_request("POST", "/api/cron/jobs/kept/run").status_code == 200
    (manual,) = wait_runs_finished(server, "kept")
    within = create_job(server, text_job("within-grace", "late but fine", schedule=once_at(3)))
    beyond = create_job(
        server,
        text_job("beyond-grace", "too late", schedule=once_at(3), misfire_grace_seconds=0),
    )
    server.stop()

    # Stay down until both ticks are well past: 0 s grace plus the 1 s on-time tolerance.
    due = datetime.fromisoformat(within["schedule"]["run_at"])
    time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds() + 2.5))
    server.start()

    jobs = {j["id"]: j for j in server.api_request("GET", "/api/cron/jobs").json()}
    assert jobs["kept"] == kept and jobs["beyond-grace"] == beyond
    assert history(server, "kept") == [manual]

    (caught_up,) = wait_runs_finished(server, "within-grace", timeout=15)
    assert (caught_up["trigger"], caught_up["status"]) == ("scheduled", "success")
    assert datetime.fromisoformat(caught_up["started_at"]) > due

    (skipped,) = wait_runs_finished(server, "beyond-grace", timeout=15)
    assert (skipped["trigger"], skipped["status"]) == ("scheduled", "skipped")
    assert "misfire grace" in skipped["error"]
    state = server.api_request("GET", "/api/cron/jobs/beyond-grace/state").json()
    assert state["last_status"] == "skipped" and state["next_run_at"] is None
    messages = server.api_request("GET", "/api/chats/cron:beyond-grace/messages")
    assert messages.status_code == 404  # nothing was ever posted there

    # Once handled, a missed tick is never handled again.
    server.restart()
    assert len(history(server, "within-grace")) == 1
    assert len(history(server, "beyond-grace")) == 1


@pytest.mark.parametrize("down", ["kill", "stop"])
def test_a_run_whose_call_outlives_its_server_goes_on_to_its_end(server: Any, down: str) -> None:
    """With the keeper (the default) the run's shell call survives a kill -9 or a
    graceful stop, its turn resumes, and the run is recorded as it really ends, not as
    cut by the restart."""
    gate = server.home / "workspace" / "gate"
    model = FakeModel()
    try:
        register_mock_provider(server, model.url)
        command = f"while [ ! -e {gate} ]; do sleep 0.1; done; echo built"
        model.script(shell_call(command, timeout=120), {"text": "the build is done"})
        create_job(server, agent_job("durable", "build", approval_level="off", timeout_seconds=120))
        assert server.api_request("POST", "/api/cron/jobs/durable/run").status_code == 200
        wait_for(
            lambda: server.api_request("GET", "/api/tool-calls/cron:durable").json()["items"],
            10,
            "the shell call",
        )
        if down == "kill":
            server.kill()
        else:
            server.stop()
        server.start()

        (run,) = history(server, "durable")
        assert (run["status"], run["error"]) == ("running", None)
        gate.touch()
        (run,) = wait_runs_finished(server, "durable", timeout=30)
    finally:
        model.close()

    assert (run["status"], run["error"]) == ("success", None)
    task = server.api_request("GET", f"/api/console/chat/task/{run['task_id']}").json()
    assert (task["status"], task["result"]["status"]) == ("finished", "completed")
    assert "the build is done" in str(task["result"])


def test_a_resumed_run_keeps_its_jobs_unattended_policy(server: Any) -> None:
    """A job that waits for a person when its run needs one: after a restart took the
    run up again, its next call was refused at once (the cron default), as the task
    did not keep the job's policy."""
    gate = server.home / "workspace" / "gate"
    model = FakeModel()

    def pending() -> list[dict[str, Any]]:
        resp = server.api_request("GET", "/api/approval/list", params={"session_id": "cron:wj"})
        return list(resp.json()["pending_approvals"])

    def approve_next() -> None:
        def asked_or_over() -> list[dict[str, Any]] | bool:
            return pending() or history(server, "wj")[0]["status"] != "running"

        asked = wait_for(asked_or_over, 20, "an approval (or the run's end)")
        assert asked is not True, history(server, "wj")
        (approval,) = pending()
        body = {"request_id": approval["request_id"], "session_id": "cron:wj"}
        assert server.api_request("POST", "/api/approval/approve", json=body).status_code == 200

    try:
        register_mock_provider(server, model.url)
        first = f"while [ ! -e {gate} ]; do sleep 0.1; done; echo first"
        model.script(shell_call(first), shell_call("echo second"), {"text": "both ran"})
        job = agent_job("wj", "go", approval_level="strict", when_unattended="wait")
        create_job(server, job)
        assert server.api_request("POST", "/api/cron/jobs/wj/run").status_code == 200
        approve_next()
        wait_for(
            lambda: server.api_request("GET", "/api/tool-calls/cron:wj").json()["items"],
            10,
            "the first call running",
        )
        server.stop()
        server.start()
        gate.touch()
        approve_next()
        (run,) = wait_runs_finished(server, "wj", timeout=30)
    finally:
        model.close()

    assert (run["status"], run["error"]) == ("success", None)
    task = server.api_request("GET", f"/api/console/chat/task/{run['task_id']}").json()
    assert "both ran" in str(task["result"])


def test_a_run_cut_by_a_crash_is_closed_after_restart(tmp_path: Path) -> None:
    """Without the keeper the call dies with its server: the run is recorded as cut."""
    server = start_server(tmp_path / "home", TETHER_KEEPER="0")
    model = FakeModel()
    try:
        register_mock_provider(server, model.url)
        model.script(shell_call("sleep 30"), {"text": "unreachable"})
        create_job(server, agent_job("crashy", "sleep", approval_level="off"))
        assert server.api_request("POST", "/api/cron/jobs/crashy/run").status_code == 200
        wait_for(
            lambda: server.api_request("GET", "/api/tool-calls/cron:crashy").json()["items"],
            10,
            "the shell call",
        )
        server.kill()
        server.start()
        (run,) = history(server, "crashy")
    finally:
        model.close()
        server.close()

    assert (run["status"], run["error"]) == ("error", "server restarted during the run")
    assert run["finished_at"] is not None
