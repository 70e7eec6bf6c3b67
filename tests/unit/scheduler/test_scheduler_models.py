"""Validation of cron job specs (tether.scheduler.models)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from tether.scheduler.models import (
    CronSchedule,
    JobSpec,
    OnceSchedule,
    default_session_id,
    validate_job_spec,
)

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)


def cron_job(**overrides: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": "morning digest",
        "schedule": {"type": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
        "task_type": "agent",
        "request": {"input": ask("Summarise my inbox")},
    }
    job.update(overrides)
    return job


def ask(text: str) -> list[dict[str, Any]]:
    """A QwenPaw agent request's input: one user message with one text part."""
    return [{"role": "user", "type": "message", "content": [{"type": "text", "text": text}]}]


def with_runtime(**runtime: Any) -> dict[str, Any]:
    return cron_job(runtime=runtime)


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
            "task_type": "text",
            "text": "hi",
        },
        now=NOW,
    )
    assert spec.id is None
    assert spec.enabled is True
    assert spec.dispatch is None
    assert spec.approval_level == "auto"
    assert spec.runtime.timeout_seconds == 120
    assert spec.runtime.misfire_grace_seconds == 600
    assert isinstance(spec.schedule, CronSchedule)
    assert spec.schedule.timezone == "UTC"
    assert spec.task_type == "text" and spec.request is None
    # QwenPaw's rule: a recurring text job does not go to the inbox.
    assert spec.save_result_to_inbox is False


def test_default_session_id() -> None:
    assert default_session_id("daily-report") == "cron:daily-report"


def test_with_id_fills_the_default_target_and_the_request_follows_it() -> None:
    spec = validate_job_spec(cron_job(), now=NOW).with_id("digest")
    assert spec.dispatch is not None
    assert spec.dispatch.channel == "console"
    assert spec.dispatch.target.session_id == "cron:digest"
    assert spec.request is not None and spec.request.session_id == "cron:digest"


def test_request_follows_the_dispatch_target() -> None:
    target = {"user_id": "alice", "session_id": "console:alice"}
    data = cron_job(
        dispatch={"channel": "console", "target": target},
        request={"input": ask("hi"), "session_id": "elsewhere", "user_id": "bob"},
    )
    spec = validate_job_spec(data, now=NOW)
    assert spec.request is not None
    assert (spec.request.user_id, spec.request.session_id) == ("alice", "console:alice")


@pytest.mark.parametrize(
    "given",
    ["plain text", ask("plain text"), [{"role": "user", "content": "plain text"}]],
    ids=["string", "parts", "string-content"],
)
def test_prompt_is_read_from_every_input_form(given: object) -> None:
    spec = validate_job_spec(cron_job(request={"input": given}), now=NOW)
    assert spec.request is not None and spec.request.prompt() == "plain text"


def test_full_cron_job_round_trips_through_json() -> None:
    data = cron_job(
        id="job_1",
        enabled=False,
        dispatch={"channel": "console", "target": {"user_id": "u", "session_id": "main"}},
        approval_level="strict",
        runtime={"timeout_seconds": 30, "misfire_grace_seconds": 0},
        meta={"owner": "ops"},
    )
    spec = validate_job_spec(data, now=NOW)
    assert spec.request is not None
    assert spec.request.prompt() == "Summarise my inbox"
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
    spec = validate_job_spec(cron_job(request={"input": ask("  indented\n")}), now=NOW)
    assert spec.request is not None
    assert spec.request.prompt() == "  indented\n"


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


def nested(depth: int, inner: Any) -> Any:
    """``inner`` wrapped in ``depth`` lists."""
    for _ in range(depth):
        inner = [inner]
    return inner


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
    ("agent without request", drop("request"), ()),
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
    ("empty prompt", cron_job(request={"input": ask("")}), ()),
    ("blank prompt", cron_job(request={"input": ask(" \n ")}), ()),
    ("missing input", cron_job(request={}), ()),
    ("empty text", cron_job(task_type="text", text=""), ()),
    ("unknown task type", cron_job(task_type="shell"), ("task_type",)),
    (
        "silent text job",
        cron_job(
            task_type="text",
            text="x",
            dispatch={"target": {"user_id": "u", "session_id": "s"}, "silent": True},
        ),
        (),
    ),
    ("dispatch without target", cron_job(dispatch={"channel": "console"}), ("dispatch", "target")),
    (
        "unknown dispatch mode",
        cron_job(dispatch={"mode": "loud", "target": {"user_id": "u", "session_id": "s"}}),
        ("dispatch", "mode"),
    ),
    ("bad approval level", cron_job(approval_level="yolo"), ("approval_level",)),
    ("approval level not a string", cron_job(approval_level=1), ("approval_level",)),
    ("zero timeout", with_runtime(timeout_seconds=0), ("runtime", "timeout_seconds")),
    ("negative timeout", with_runtime(timeout_seconds=-5), ("runtime", "timeout_seconds")),
    ("fractional timeout", with_runtime(timeout_seconds=1.5), ("runtime", "timeout_seconds")),
    ("string timeout", with_runtime(timeout_seconds="60"), ("runtime", "timeout_seconds")),
    ("bool timeout", with_runtime(timeout_seconds=True), ("runtime", "timeout_seconds")),
    (
        "negative grace",
        with_runtime(misfire_grace_seconds=-1),
        ("runtime", "misfire_grace_seconds"),
    ),
    (
        "timeout past ten years",
        with_runtime(timeout_seconds=10**400),
        ("runtime", "timeout_seconds"),
    ),
    (
        "grace past ten years",
        with_runtime(misfire_grace_seconds=10**15),
        ("runtime", "misfire_grace_seconds"),
    ),
    (
        "run_at near the end of the calendar",
        once_job("9999-12-31T23:59:59-14:00"),
        ("schedule", "once", "run_at"),
    ),
    (
        "cron of 800 KB",
        with_schedule(cron=",".join(["1"] * 400_000) + " * * * *"),
        ("schedule", "cron", "cron"),
    ),
    (
        "input nested 300 deep",
        cron_job(request={"input": nested(300, ask("hi"))}),
        ("request", "input"),
    ),
    # Stored and sent back as they are: serialising ~300 deep failed with a 500.
    (
        "kept request field nested 40 deep",
        cron_job(request={"input": ask("hi"), "extra": nested(40, 1)}),
        ("request",),
    ),
    (
        "dispatch meta nested 40 deep",
        cron_job(
            dispatch={"target": {"user_id": "u", "session_id": "s"}, "meta": {"m": nested(40, 1)}}
        ),
        ("dispatch", "meta"),
    ),
    ("zero concurrency", with_runtime(max_concurrency=0), ("runtime", "max_concurrency")),
    ("unknown runtime field", with_runtime(retries=3), ("runtime", "retries")),
    ("string enabled", cron_job(enabled="yes"), ("enabled",)),
    ("empty id", cron_job(id=""), ("id",)),
    ("id with slash", cron_job(id="../etc"), ("id",)),
    ("id with space", cron_job(id="my job"), ("id",)),
    ("old task field", cron_job(task={"type": "agent", "prompt": "x"}), ("task",)),
    (
        "empty target session",
        cron_job(dispatch={"target": {"user_id": "u", "session_id": ""}}),
        ("dispatch", "target", "session_id"),
    ),
]


@pytest.mark.parametrize(
    ("data", "loc"), [pytest.param(d, loc, id=name) for name, d, loc in BAD_FIELDS]
)
def test_bad_field_is_located(data: dict[str, Any], loc: tuple[int | str, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        validate_job_spec(data, now=NOW)
    assert error_locs(info.value) == [loc]


def test_the_largest_limits_and_a_deep_input_within_bounds_are_accepted() -> None:
    ten_years = 10 * 365 * 86400
    data = cron_job(
        request={"input": nested(28, ask("still found"))},
        runtime={"timeout_seconds": ten_years, "misfire_grace_seconds": ten_years},
    )
    spec = validate_job_spec(data, now=NOW)
    assert spec.request is not None and spec.request.prompt() == "still found"
    assert spec.runtime.timeout_seconds == spec.runtime.misfire_grace_seconds == ten_years


def test_zero_grace_is_allowed() -> None:
    spec = validate_job_spec(with_runtime(misfire_grace_seconds=0), now=NOW)
    assert spec.runtime.misfire_grace_seconds == 0


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
