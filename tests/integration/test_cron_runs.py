"""Cron runs on a real server: manual and scheduled runs, tool calls, timeout, approvals."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psutil
import pytest
from core_support import Stack, shell_call, stack_for_module, wait_for
from cron_support import (
    agent_job,
    create_job,
    once_at,
    text_job,
    wait_runs_finished,
)
from helpers import host_pid

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # Approvals expire fast so that a run nobody can answer ends quickly.
    yield from stack_for_module("cron", TETHER_APPROVAL_TIMEOUT_SECONDS="1")


def run_now(stack: Stack, job_id: str) -> str:
    resp = stack.api("POST", f"/api/cron/jobs/{job_id}/run")
    assert resp.status_code == 200, resp.text
    return str(resp.json()["run_id"])


def test_manual_run_with_a_tool_call_ends_success(stack: Stack) -> None:
    stack.model.script(
        {"tool_calls": [("get_current_time", "{}")]}, {"text": "It is time for tea."}
    )
    create_job(stack.server, agent_job("clock", "what time is it?"))
    run_id = run_now(stack, "clock")

    (run,) = wait_runs_finished(stack.server, "clock")
    assert (run["run_id"], run["trigger"], run["status"]) == (run_id, "manual", "success")
    assert run["error"] is None and run["task_id"]
    assert datetime.fromisoformat(run["finished_at"]) >= datetime.fromisoformat(run["started_at"])

    task = stack.task(run["task_id"])
    assert (task["session_id"], task["trigger"]) == ("cron:clock", "cron")
    messages = stack.messages("cron:clock")
    assert messages[0]["message"] == {"role": "user", "content": "what time is it?"}
    (call_id,) = [m["message"]["x_tether_call_id"] for m in messages if m["kind"] == "tool"]
    call = stack.call("cron:clock", call_id)
    assert (call["tool_name"], call["end_state"]) == ("get_current_time", "success")
    assert messages[-1]["message"]["content"] == "It is time for tea."

    state = stack.api("GET", "/api/cron/jobs/clock/state").json()
    assert state["last_status"] == "success" and state["last_error"] is None
    assert state["last_run_at"] == run["started_at"]


def test_once_job_fires_with_trigger_scheduled(stack: Stack) -> None:
    schedule = once_at(2)
    create_job(stack.server, text_job("soon", "Stand up and stretch.", schedule=schedule))

    (run,) = wait_runs_finished(stack.server, "soon", timeout=15)
    assert (run["trigger"], run["status"]) == ("scheduled", "success")
    assert datetime.fromisoformat(run["scheduled_for"]) == datetime.fromisoformat(
        schedule["run_at"]
    )
    assert datetime.fromisoformat(run["started_at"]) >= datetime.fromisoformat(schedule["run_at"])
    (message,) = stack.messages("cron:soon")
    assert message["kind"] == "assistant"
    assert message["message"] == {"role": "assistant", "content": "Stand up and stretch."}
    state = stack.api("GET", "/api/cron/jobs/soon/state").json()
    assert state["next_run_at"] is None and state["last_status"] == "success"


def test_timeout_stops_the_run_and_kills_its_processes(stack: Stack) -> None:
    pid_file: Path = stack.workspace / "cron-timeout.pid"
    stack.model.script(
        shell_call(f"echo $$ > {pid_file.name}; sleep 30; echo never"), {"text": "unreachable"}
    )
    create_job(stack.server, agent_job("slow", "sleep a while", timeout_seconds=1))
    run_now(stack, "slow")

    # While it runs, its call is listed (and could be cancelled) like any other.
    (live,) = wait_for(lambda: stack.live_calls("cron:slow"), 10, "the shell call")
    assert live["tool_name"] == "execute_shell_command"
    ns_pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 5, "pid"))
    # In the sandbox the call has its own pid namespace: find the host's number.
    pid = wait_for(lambda: host_pid(ns_pid, live["tool_call_id"]), 5, "the host pid")
    busy = stack.api("POST", "/api/cron/jobs/slow/run")
    assert busy.status_code == 409

    (run,) = wait_runs_finished(stack.server, "slow", timeout=15)
    assert (run["status"], run["outcome"]) == ("error", "timeout")
    assert "timeout" in run["error"]
    wait_for(lambda: not _alive(pid), 10, f"process {pid} to be gone")
    assert stack.live_calls("cron:slow") == []
    assert stack.call("cron:slow", live["tool_call_id"])["end_state"] == "cancelled"
    # Its task says why it stopped (it said "the task was stopped", as if a person had).
    task = stack.task(run["task_id"])
    error = {"message": "the run exceeded its timeout of 1 s"}
    assert (task["result"]["status"], task["result"]["error"]) == ("cancelled", error)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_run_that_needs_a_human_is_denied_when_the_approval_expires(stack: Stack) -> None:
    stack.model.script({"tool_calls": [("get_current_time", "{}")]}, {"text": "Nobody let me."})
    create_job(stack.server, agent_job("asks", "check the time", approval_level="strict"))
    run_now(stack, "asks")

    (run,) = wait_runs_finished(stack.server, "asks", timeout=20)
    assert run["status"] == "success"  # the turn itself completed
    assert "denied" in run["error"] and "get_current_time" in run["error"]
    tool_results = [m for m in stack.messages("cron:asks") if m["kind"] == "tool"]
    assert len(tool_results) == 1


def test_failed_turn_is_an_error_run(stack: Stack) -> None:
    stack.model.script({"status": 400, "message": "model refuses"})
    create_job(stack.server, agent_job("broken"))
    run_now(stack, "broken")
    (run,) = wait_runs_finished(stack.server, "broken")
    assert run["status"] == "error" and run["error"]
    state = stack.api("GET", "/api/cron/jobs/broken/state").json()
    assert (state["last_status"], state["last_error"]) == ("error", run["error"])


def test_history_is_newest_first(stack: Stack) -> None:
    create_job(stack.server, text_job("twice", "ping"))
    first = run_now(stack, "twice")
    wait_runs_finished(stack.server, "twice", 1)
    second = run_now(stack, "twice")
    runs = wait_runs_finished(stack.server, "twice", 2)
    assert [r["run_id"] for r in runs] == [second, first]
    assert [m["message"]["content"] for m in stack.messages("cron:twice")] == ["ping", "ping"]


def test_deleting_a_job_removes_its_history(stack: Stack) -> None:
    create_job(stack.server, text_job("gone", "bye"))
    run_now(stack, "gone")
    wait_runs_finished(stack.server, "gone")
    assert stack.api("DELETE", "/api/cron/jobs/gone").status_code == 200
    assert stack.api("GET", "/api/cron/jobs/gone/history").status_code == 404
    assert "gone" not in [j["id"] for j in stack.api("GET", "/api/cron/jobs").json()]


def test_a_cron_runs_tool_call_can_be_cancelled_and_the_run_goes_on(stack: Stack) -> None:
    stack.model.script(shell_call("sleep 30"), {"text": "The user stopped the sleep."})
    create_job(stack.server, agent_job("cancellable", "sleep"))
    run_now(stack, "cancellable")
    (live,) = wait_for(lambda: stack.live_calls("cron:cancellable"), 10, "the shell call")

    resp = stack.api("POST", f"/api/tool-calls/cron:cancellable/{live['tool_call_id']}/cancel")
    assert resp.status_code == 202, resp.text

    (run,) = wait_runs_finished(stack.server, "cancellable", timeout=15)
    assert (run["status"], run["error"]) == ("success", None)
    done = stack.call("cron:cancellable", live["tool_call_id"])
    assert done["end_state"] == "cancelled"
    assert stack.messages("cron:cancellable")[-1]["message"]["content"] == (
        "The user stopped the sleep."
    )
