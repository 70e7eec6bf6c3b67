"""Validation of cron job specs (tether.scheduler.models)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from tether.scheduler.models import (
    AgentTask,
    CronSchedule,
    JobSpec,
    OnceSchedule,
    TextTask,
    default_session_id,
    validate_job_spec,
)

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)


def cron_job(**overrides: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": "morning digest",
        "schedule": {"type": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
        "task": {"type": "agent", "prompt": "Summarise my inbox"},
    }
    job.update(overrides)
    return job


def once_job(run_at: str = "2030-06-02T09:00:00+02:00", **overrides: Any) -> dict[str, Any]:
    return cron_job(schedule={"type": "once", "run_at": run_at}, **overrides)


def error_locs(exc: ValidationError) -> list[tuple[int | str, ...]]:
    return [tuple(err["loc"]) for err in exc.errors()]


# --------------------------------------------------------------------------- valid input


def test_defaults_are_applied() -> None:
    spec = validate_job_spec(
        {
            "name": "n",
            "schedule": {"type": "cron", "cron": "*/15 * * * *"},
            "task": {"type": "text", "text": "hi"},
        },
        now=NOW,
    )
    assert spec.id is None
    assert spec.enabled is True
    assert spec.session_id is None
    assert spec.approval_level == "auto"
    assert spec.timeout_seconds == 600
    assert spec.misfire_grace_seconds == 300
    assert isinstance(spec.schedule, CronSchedule)
    assert spec.schedule.timezone == "UTC"
    assert isinstance(spec.task, TextTask)


def test_default_session_id() -> None:
    assert default_session_id("daily-report") == "cron:daily-report"


def test_full_cron_job_round_trips_through_json() -> None:
    data = cron_job(
        id="job_1",
        enabled=False,
        session_id="main",
        approval_level="strict",
        timeout_seconds=30,
        misfire_grace_seconds=0,
    )
    spec = validate_job_spec(data, now=NOW)
    assert isinstance(spec.task, AgentTask)
    assert spec.task.prompt == "Summarise my inbox"
    dumped = spec.model_dump(mode="json")
    assert dumped["schedule"] == data["schedule"]
    assert JobSpec.model_validate(dumped) == spec


def test_once_job_keeps_its_offset_when_serialised() -> None:
    spec = validate_job_spec(once_job("2030-06-02T09:00:00+02:00"), now=NOW)
    assert isinstance(spec.schedule, OnceSchedule)
    assert spec.schedule.run_at == datetime(2030, 6, 2, 7, 0, tzinfo=UTC)
    assert spec.model_dump(mode="json")["schedule"]["run_at"] == "2030-06-02T09:00:00+02:00"
    utc_spec = validate_job_spec(once_job("2030-06-02T07:00:00Z"), now=NOW)
    serialised = utc_spec.model_dump(mode="json")["schedule"]["run_at"]
    assert datetime.fromisoformat(serialised) == spec.schedule.run_at
    assert datetime.fromisoformat(serialised).utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("given", "expected"),
    [("STRICT", "strict"), ("Smart", "smart"), (" off ", "off"), ("auto", "auto")],
)
def test_approval_level_is_normalised(given: str, expected: str) -> None:
    assert validate_job_spec(cron_job(approval_level=given), now=NOW).approval_level == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("  0   9 * * 1-5 ", "0 9 * * 1-5"),
        ("0 9 * jan-mar mon-fri", "0 9 * jan-mar mon-fri"),
        ("0 0 L * *", "0 0 L * *"),
        ("0 12 29 2 *", "0 12 29 2 *"),
        ("*/15 * * * *", "*/15 * * * *"),
    ],
)
def test_cron_expressions_accepted_and_normalised(given: str, expected: str) -> None:
    schedule = {"type": "cron", "cron": given, "timezone": "UTC"}
    spec = validate_job_spec(cron_job(schedule=schedule), now=NOW)
    assert isinstance(spec.schedule, CronSchedule)
    assert spec.schedule.cron == expected


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kathmandu", "Etc/GMT+5"])
def test_known_zones_accepted(zone: str) -> None:
    schedule = {"type": "cron", "cron": "0 9 * * *", "timezone": zone}
    spec = validate_job_spec(cron_job(schedule=schedule), now=NOW)
    assert isinstance(spec.schedule, CronSchedule)
    assert spec.schedule.zone().key == zone


def test_name_is_stripped() -> None:
    assert validate_job_spec(cron_job(name="  digest "), now=NOW).name == "digest"


def test_prompt_whitespace_is_preserved() -> None:
    task = {"type": "agent", "prompt": "  indented\n"}
    spec = validate_job_spec(cron_job(task=task), now=NOW)
    assert isinstance(spec.task, AgentTask)
    assert spec.task.prompt == "  indented\n"


# --------------------------------------------------------------------------- invalid input


def with_schedule(**schedule: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": "cron", "cron": "0 9 * * *", "timezone": "UTC"}
    base.update(schedule)
    return cron_job(schedule=base)


BAD_CRON = [
    "* * * * * *",  # seconds field (6 fields)
    "0 0 9 * * * 2030",  # 7 fields
    "* * * *",
    "",
    "@reboot",
    "@daily",
    "61 * * * *",
    "0 24 * * *",
    "0 0 32 * *",
    "0 0 * 13 *",
    "0 0 * * 8",
    "not a cron expr at all",
    "H * * * *",
    "R 9 * * *",
    "0 0 30 2 *",  # never fires
    "0 0 31 4,6,9,11 *",  # never fires
]


@pytest.mark.parametrize("expr", BAD_CRON)
def test_bad_cron_expression(expr: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_job_spec(with_schedule(cron=expr), now=NOW)
    assert error_locs(info.value) == [("schedule", "cron", "cron")]
    assert info.value.errors()[0]["type"] == "cron_expression"


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus_Mons", "Europe", "localtime", "../etc/passwd", "", "utc", "UTC+1"]
)
def test_unknown_timezone(zone: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_job_spec(with_schedule(timezone=zone), now=NOW)
    assert error_locs(info.value) == [("schedule", "cron", "timezone")]
    assert info.value.errors()[0]["type"] == "timezone"


def test_all_schedule_errors_are_reported_together() -> None:
    with pytest.raises(ValidationError) as info:
        validate_job_spec(with_schedule(cron="@reboot", timezone="Nowhere/City"), now=NOW)
    assert sorted(error_locs(info.value)) == [
        ("schedule", "cron", "cron"),
        ("schedule", "cron", "timezone"),
    ]


def drop(key: str) -> dict[str, Any]:
    job = cron_job()
    del job[key]
    return job


BAD_FIELDS: list[tuple[str, dict[str, Any], tuple[int | str, ...]]] = [
    ("unknown top-level field", cron_job(colour="red"), ("colour",)),
    ("missing name", drop("name"), ("name",)),
    ("empty name", cron_job(name=""), ("name",)),
    ("blank name", cron_job(name="   "), ("name",)),
    ("missing schedule", drop("schedule"), ("schedule",)),
    ("missing task", drop("task"), ("task",)),
    ("unknown schedule field", with_schedule(every="1h"), ("schedule", "cron", "every")),
    ("unknown schedule type", cron_job(schedule={"type": "interval"}), ("schedule",)),
    ("schedule without type", cron_job(schedule={"cron": "* * * * *"}), ("schedule",)),
    ("cron missing", cron_job(schedule={"type": "cron"}), ("schedule", "cron", "cron")),
    ("cron not a string", with_schedule(cron=5), ("schedule", "cron", "cron")),
    (
        "naive run_at",
        once_job("2030-06-02T09:00:00"),
        ("schedule", "once", "run_at"),
    ),
    ("garbage run_at", once_job("tomorrow"), ("schedule", "once", "run_at")),
    (
        "unknown once field",
        cron_job(schedule={"type": "once", "run_at": "2030-06-02T09:00:00Z", "cron": "x"}),
        ("schedule", "once", "cron"),
    ),
    (
        "empty prompt",
        cron_job(task={"type": "agent", "prompt": ""}),
        ("task", "agent", "prompt"),
    ),
    (
        "blank prompt",
        cron_job(task={"type": "agent", "prompt": " \n "}),
        ("task", "agent", "prompt"),
    ),
    ("missing prompt", cron_job(task={"type": "agent"}), ("task", "agent", "prompt")),
    ("empty text", cron_job(task={"type": "text", "text": ""}), ("task", "text", "text")),
    (
        "unknown task field",
        cron_job(task={"type": "text", "text": "x", "prompt": "y"}),
        ("task", "text", "prompt"),
    ),
    ("unknown task type", cron_job(task={"type": "shell", "cmd": "ls"}), ("task",)),
    ("bad approval level", cron_job(approval_level="yolo"), ("approval_level",)),
    ("approval level not a string", cron_job(approval_level=1), ("approval_level",)),
    ("zero timeout", cron_job(timeout_seconds=0), ("timeout_seconds",)),
    ("negative timeout", cron_job(timeout_seconds=-5), ("timeout_seconds",)),
    ("infinite timeout", cron_job(timeout_seconds=float("inf")), ("timeout_seconds",)),
    ("string timeout", cron_job(timeout_seconds="60"), ("timeout_seconds",)),
    ("bool timeout", cron_job(timeout_seconds=True), ("timeout_seconds",)),
    ("negative grace", cron_job(misfire_grace_seconds=-1), ("misfire_grace_seconds",)),
    ("nan grace", cron_job(misfire_grace_seconds=float("nan")), ("misfire_grace_seconds",)),
    ("string enabled", cron_job(enabled="yes"), ("enabled",)),
    ("empty id", cron_job(id=""), ("id",)),
    ("id with slash", cron_job(id="../etc"), ("id",)),
    ("id with space", cron_job(id="my job"), ("id",)),
    ("empty session id", cron_job(session_id=""), ("session_id",)),
]


@pytest.mark.parametrize(
    ("data", "loc"), [pytest.param(d, loc, id=name) for name, d, loc in BAD_FIELDS]
)
def test_bad_field_is_located(data: dict[str, Any], loc: tuple[int | str, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        validate_job_spec(data, now=NOW)
    assert error_locs(info.value) == [loc]


def test_zero_grace_is_allowed() -> None:
    assert validate_job_spec(cron_job(misfire_grace_seconds=0), now=NOW).misfire_grace_seconds == 0


# --------------------------------------------------------------------------- once jobs and now


def test_once_in_the_past_is_rejected() -> None:
    data = once_job((NOW - timedelta(seconds=1)).isoformat())
    with pytest.raises(ValidationError) as info:
        validate_job_spec(data, now=NOW)
    assert error_locs(info.value) == [("schedule", "once", "run_at")]
    assert info.value.errors()[0]["type"] == "run_at_in_past"


def test_once_in_the_past_is_judged_across_offsets() -> None:
    # 13:30+02:00 is 11:30Z: before NOW (12:00Z) although its wall time is later.
    with pytest.raises(ValidationError):
        validate_job_spec(once_job("2030-06-01T13:30:00+02:00"), now=NOW)
    validate_job_spec(once_job("2030-06-01T14:30:00+02:00"), now=NOW)


def test_once_exactly_now_is_accepted() -> None:
    validate_job_spec(once_job(NOW.isoformat()), now=NOW)


def test_past_once_job_loads_without_now() -> None:
    """Stored jobs are re-validated without ``now``; a past time is fine then."""
    spec = JobSpec.model_validate(once_job("2001-01-01T00:00:00Z"))
    assert isinstance(spec.schedule, OnceSchedule)


def test_now_can_be_passed_as_validation_context() -> None:
    data = once_job("2001-01-01T00:00:00Z")
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate(data, context={"now": NOW})
    assert error_locs(info.value) == [("schedule", "once", "run_at")]


def test_now_in_another_zone() -> None:
    berlin_now = NOW.astimezone(timezone(timedelta(hours=2)))
    with pytest.raises(ValidationError):
        validate_job_spec(once_job("2030-06-01T11:59:00Z"), now=berlin_now)


def test_naive_now_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="aware"):
        validate_job_spec(cron_job(), now=datetime(2030, 1, 1))


def test_validation_does_not_mutate_input() -> None:
    data = cron_job(approval_level="STRICT")
    before = copy.deepcopy(data)
    validate_job_spec(data, now=NOW)
    assert data == before
