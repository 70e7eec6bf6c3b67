"""Shared pieces for the cron integration tests: job bodies and waiting on run history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from core_support import wait_for


def once_at(seconds_from_now: float) -> dict[str, Any]:
    run_at = datetime.now(UTC) + timedelta(seconds=seconds_from_now)
    return {"type": "once", "run_at": run_at.isoformat()}


_RUNTIME = ("timeout_seconds", "misfire_grace_seconds")


def agent_job(job_id: str, prompt: str = "do the thing", **extra: Any) -> dict[str, Any]:
    """A job in QwenPaw's shape; ``session_id`` and the runtime limits may be given flat."""
    runtime = {k: extra.pop(k) for k in _RUNTIME if k in extra}
    session_id = extra.pop("session_id", None)
    job: dict[str, Any] = {
        "id": job_id,
        "name": f"job {job_id}",
        "schedule": {"type": "cron", "cron": "0 3 * * *"},
        "task_type": "agent",
        "request": {"input": [{"role": "user", "content": [{"type": "text", "text": prompt}]}]},
        "runtime": runtime,
        **extra,
    }
    if session_id is not None:
        job["dispatch"] = {"target": {"user_id": "cron", "session_id": session_id}}
    return job


def text_job(job_id: str, text: str, **extra: Any) -> dict[str, Any]:
    job = {**agent_job(job_id, **extra), "task_type": "text", "text": text}
    del job["request"]
    return job


def create_job(server: Any, body: dict[str, Any]) -> dict[str, Any]:
    resp = server.api_request("POST", "/api/cron/jobs", json=body)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def history(server: Any, job_id: str) -> list[dict[str, Any]]:
    resp = server.api_request("GET", f"/api/cron/jobs/{job_id}/history")
    assert resp.status_code == 200, resp.text
    return list(resp.json())


def wait_runs_finished(
    server: Any, job_id: str, count: int = 1, timeout: float = 20.0
) -> list[dict[str, Any]]:
    """The job's history (newest first) once it holds ``count`` finished runs."""

    def finished() -> list[dict[str, Any]] | None:
        runs = history(server, job_id)
        done = [r for r in runs if r["status"] != "running"]
        return runs if len(done) >= count else None

    return wait_for(finished, timeout, f"{count} finished run(s) of {job_id}")
