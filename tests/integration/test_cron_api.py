"""The cron job API: CRUD, validation (422 naming the field), pause/resume, state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

pytestmark = pytest.mark.integration


def job(job_id: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "nightly report",
        "schedule": {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"},
        "task_type": "agent",
        "request": {"input": "summarise the logs"},
        **extra,
    }
    if job_id is not None:
        body["id"] = job_id
    return body


def create(app_server: Any, body: dict[str, Any]) -> dict[str, Any]:
    resp = app_server.api_request("POST", "/api/cron/jobs", json=body)
    assert resp.status_code == 200, resp.text
    created: dict[str, Any] = resp.json()
    return created


def parse(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() is not None, f"{value!r} has no UTC offset"
    return parsed


def test_create_fills_in_the_defaults(app_server: Any) -> None:
    created = create(app_server, job("defaults"))
    target = {"user_id": "cron", "session_id": "cron:defaults"}
    assert created == {
        **job("defaults"),
        "enabled": True,
        "text": None,
        "request": {"input": "summarise the logs", **target},
        "dispatch": {
            "type": "channel",
            "channel": "console",
            "target": target,
            "mode": "stream",
            "silent": False,
            "meta": {},
        },
        "save_result_to_inbox": True,
        "runtime": {
            "max_concurrency": 1,
            "timeout_seconds": 120,
            "misfire_grace_seconds": 600,
            "share_session": False,
            "tool_safety": False,
        },
        "meta": {},
        "approval_level": "auto",
        "when_unattended": None,  # the session's, the server's, else deny
    }
    listed = app_server.api_request("GET", "/api/cron/jobs").json()
    assert created in listed
    view = app_server.api_request("GET", "/api/cron/jobs/defaults").json()
    assert view["spec"] == created and view["state"]["last_status"] is None


def test_create_without_id_generates_one(app_server: Any) -> None:
    created = create(app_server, job())
    assert created["id"]
    assert created["dispatch"]["target"]["session_id"] == f"cron:{created['id']}"


def test_put_replaces_and_delete_removes(app_server: Any) -> None:
    create(app_server, job("crud"))
    changed = job(
        "crud",
        name="renamed",
        dispatch={"target": {"user_id": "ops-user", "session_id": "ops"}},
        runtime={"timeout_seconds": 30},
    )
    resp = app_server.api_request("PUT", "/api/cron/jobs/crud", json=changed)
    assert resp.status_code == 200, resp.text
    assert resp.json()["name"] == "renamed"
    assert resp.json()["request"]["session_id"] == "ops"
    spec = app_server.api_request("GET", "/api/cron/jobs/crud").json()["spec"]
    assert spec["runtime"]["timeout_seconds"] == 30

    assert app_server.api_request("DELETE", "/api/cron/jobs/crud").status_code == 200
    assert app_server.api_request("GET", "/api/cron/jobs/crud").status_code == 404
    assert app_server.api_request("DELETE", "/api/cron/jobs/crud").status_code == 404


def test_post_with_an_existing_id_is_409(app_server: Any) -> None:
    create(app_server, job("taken"))
    resp = app_server.api_request("POST", "/api/cron/jobs", json=job("taken", name="other"))
    assert resp.status_code == 409
    assert "taken" in resp.json()["detail"]
    spec = app_server.api_request("GET", "/api/cron/jobs/taken").json()["spec"]
    assert spec["name"] == "nightly report"


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", ""),
        ("PUT", ""),
        ("DELETE", ""),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("POST", "/run"),
        ("GET", "/state"),
        ("GET", "/history"),
    ],
)
def test_unknown_job_is_404(app_server: Any, method: str, suffix: str) -> None:
    kwargs = {"json": job()} if method == "PUT" else {}
    resp = app_server.api_request(method, f"/api/cron/jobs/no-such-job{suffix}", **kwargs)
    assert resp.status_code == 404, resp.text
    assert resp.json() == {"detail": "job not found"}


def _past() -> str:
    return (datetime.now(UTC) - timedelta(minutes=5)).isoformat()


INVALID = [
    pytest.param({"colour": "red"}, ["colour"], id="unknown-field"),
    pytest.param(
        {"schedule": {"type": "cron", "cron": "61 * * * *"}},
        ["schedule", "cron", "cron"],
        id="cron",
    ),
    pytest.param(
        {"schedule": {"type": "cron", "cron": "0 3 * * *", "timezone": "Mars/Olympus"}},
        ["schedule", "cron", "timezone"],
        id="zone",
    ),
    pytest.param(
        {"schedule": {"type": "once", "run_at": "PAST"}}, ["schedule", "once", "run_at"], id="past"
    ),
    pytest.param(
        {"schedule": {"type": "once", "run_at": "2031-01-01T10:00:00"}},
        ["schedule", "once", "run_at"],
        id="naive-datetime",
    ),
    pytest.param(
        {"schedule": {"type": "cron", "cron": "* * * * *", "every": 5}},
        ["schedule", "cron", "every"],
        id="unknown-nested-field",
    ),
    pytest.param({"request": {"input": "  "}}, [], id="blank-input"),
    pytest.param({"task_type": "text"}, [], id="text-without-text"),
    pytest.param({"approval_level": "sometimes"}, ["approval_level"], id="approval-level"),
    pytest.param({"runtime": {"timeout_seconds": 0}}, ["runtime", "timeout_seconds"], id="timeout"),
    pytest.param(
        {"runtime": {"misfire_grace_seconds": -1}}, ["runtime", "misfire_grace_seconds"], id="grace"
    ),
    pytest.param({"name": ""}, ["name"], id="name"),
    # No route could reach the session: /api/chats/a%2Fb is /api/chats/a/b.
    pytest.param(
        {"dispatch": {"target": {"user_id": "u", "session_id": "a/b"}}},
        ["dispatch", "target", "session_id"],
        id="session-id-slash",
    ),
]


@pytest.mark.parametrize(("change", "field"), INVALID)
def test_invalid_job_is_422_naming_the_field(
    app_server: Any, change: dict[str, Any], field: list[str]
) -> None:
    if change.get("schedule", {}).get("run_at") == "PAST":
        change = {"schedule": {"type": "once", "run_at": _past()}}
    before = app_server.api_request("GET", "/api/cron/jobs").json()
    resp = app_server.api_request("POST", "/api/cron/jobs", json={**job("bad"), **change})
    assert resp.status_code == 422, resp.text
    locations = [e["loc"] for e in resp.json()["detail"]]
    assert ["body", *field] in locations, locations
    assert app_server.api_request("GET", "/api/cron/jobs").json() == before


def test_put_is_validated_too(app_server: Any) -> None:
    create(app_server, job("guarded"))
    for body, field in [
        ({**job("other-id")}, ["body", "id"]),
        (
            {**job(), "schedule": {"type": "cron", "cron": "@daily"}},
            ["body", "schedule", "cron", "cron"],
        ),
    ]:
        resp = app_server.api_request("PUT", "/api/cron/jobs/guarded", json=body)
        assert resp.status_code == 422, resp.text
        assert field in [e["loc"] for e in resp.json()["detail"]]
    spec = app_server.api_request("GET", "/api/cron/jobs/guarded").json()["spec"]
    assert spec["name"] == "nightly report"


def test_pause_and_resume(app_server: Any) -> None:
    create(app_server, job("pausable"))
    paused = app_server.api_request("POST", "/api/cron/jobs/pausable/pause")
    assert paused.status_code == 200
    assert paused.json() == {"paused": True}
    assert (
        app_server.api_request("GET", "/api/cron/jobs/pausable").json()["spec"]["enabled"] is False
    )
    state = app_server.api_request("GET", "/api/cron/jobs/pausable/state").json()
    assert state["next_run_at"] is None

    resumed = app_server.api_request("POST", "/api/cron/jobs/pausable/resume")
    assert resumed.json() == {"resumed": True}
    state = app_server.api_request("GET", "/api/cron/jobs/pausable/state").json()
    assert parse(state["next_run_at"]).astimezone(UTC).hour == 3


def test_state_before_any_run(app_server: Any) -> None:
    create(app_server, job("fresh"))
    state = app_server.api_request("GET", "/api/cron/jobs/fresh/state").json()
    assert state["last_run_at"] is None and state["last_status"] is None
    assert state["last_error"] is None
    assert app_server.api_request("GET", "/api/cron/jobs/fresh/history").json() == []


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Sydney"])
def test_state_next_run_at_follows_the_zone(app_server: Any, zone: str) -> None:
    """02:30 local does not exist on a spring-forward day: the next run is still
    a real instant at 02:30 (or 03:00 on that day) in the zone, given with an offset."""
    job_id = "dst-" + zone.replace("/", "-").lower()
    schedule = {"type": "cron", "cron": "30 2 * * *", "timezone": zone}
    before = datetime.now(UTC)
    create(app_server, job(job_id, schedule=schedule))
    raw = app_server.api_request("GET", f"/api/cron/jobs/{job_id}/state").json()["next_run_at"]

    next_run = parse(raw)
    # Fixed dates around DST changes, against instants worked out by hand, are in
    # tests/unit/scheduler/test_scheduler_api_dates.py (with the clock set).
    assert before < next_run <= before + timedelta(days=1, hours=1)
    local = next_run.astimezone(ZoneInfo(zone))
    assert (local.hour, local.minute) in ((2, 30), (3, 0))
