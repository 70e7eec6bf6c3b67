"""Misfire planning (tether.scheduler.timing.plan_catch_up)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tether.scheduler import timing
from tether.scheduler.models import CronSchedule, OnceSchedule, validate_job_spec
from tether.scheduler.timing import SKIPPED_LIST_CAP, CatchUp, plan_catch_up

HOURLY = CronSchedule(type="cron", cron="0 * * * *")
EVERY_MINUTE = CronSchedule(type="cron", cron="* * * * *")
CREATED = datetime(2025, 1, 1, tzinfo=UTC)
GRACE = 300.0


def at(hour: int, minute: int = 0, second: float = 0, day: int = 6) -> datetime:
    return datetime(2025, 1, day, hour, minute, tzinfo=UTC) + timedelta(seconds=second)


def minutes(start: datetime, count: int) -> list[datetime]:
    return [start + timedelta(minutes=i) for i in range(count)]


# --------------------------------------------------------------------------- cron jobs


def test_nothing_due_yet() -> None:
    plan = plan_catch_up(HOURLY, at(10), CREATED, at(10, 30), GRACE)
    assert plan == CatchUp(run_at=None, skipped=[], next_run_at=at(11))


def test_on_time_tick_runs() -> None:
    plan = plan_catch_up(HOURLY, at(10), CREATED, at(11, 0, 0.02), GRACE)
    assert plan == CatchUp(run_at=at(11), skipped=[], next_run_at=at(12))


def test_missed_within_grace_runs_once() -> None:
    plan = plan_catch_up(HOURLY, at(10), CREATED, at(11, 4), GRACE)
    assert plan.run_at == at(11)
    assert plan.skipped == []
    assert plan.next_run_at == at(12)


def test_grace_boundary_is_inclusive() -> None:
    on_edge = plan_catch_up(HOURLY, at(10), CREATED, at(11, 5), GRACE, tolerance_seconds=0)
    assert on_edge.run_at == at(11)
    past_edge = plan_catch_up(HOURLY, at(10), CREATED, at(11, 5, 0.001), GRACE, tolerance_seconds=0)
    assert past_edge.run_at is None
    assert past_edge.skipped == [at(11)]


def test_many_missed_ticks_run_once_and_skip_the_rest() -> None:
    # down from 10:00:30 to 13:02: ticks 11:00, 12:00, 13:00 were missed
    plan = plan_catch_up(HOURLY, at(10), CREATED, at(13, 2), GRACE)
    assert plan.run_at == at(13)
    assert plan.skipped == [at(11), at(12)]
    assert plan.skipped_more == 0
    assert plan.skipped_total == 2
    assert plan.next_run_at == at(14)


def test_missed_beyond_grace_all_skipped() -> None:
    plan = plan_catch_up(HOURLY, at(10), CREATED, at(13, 10), GRACE)
    assert plan.run_at is None
    assert plan.skipped == [at(11), at(12), at(13)]
    assert plan.next_run_at == at(14)


def test_zero_grace_still_forgives_scheduler_latency() -> None:
    assert plan_catch_up(HOURLY, at(10), CREATED, at(11, 0, 0.5), 0).run_at == at(11)
    late = plan_catch_up(HOURLY, at(10), CREATED, at(11, 0, 2), 0)
    assert late.run_at is None
    assert late.skipped == [at(11)]


def test_without_last_fire_counts_from_created_at() -> None:
    plan = plan_catch_up(HOURLY, None, at(10, 30), at(12, 1), GRACE)
    assert plan.run_at == at(12)
    assert plan.skipped == [at(11)]


def test_tick_at_creation_time_is_not_due() -> None:
    plan = plan_catch_up(HOURLY, None, at(10), at(10, 0, 30), GRACE)
    assert plan.run_at is None
    assert plan.skipped == []
    assert plan.next_run_at == at(11)


def test_schedule_change_after_last_fire_is_the_anchor() -> None:
    # last fired at 08:00, schedule (re)created at 10:30: 09:00 and 10:00 are not due
    plan = plan_catch_up(HOURLY, at(8), at(10, 30), at(11, 1), GRACE)
    assert plan.run_at == at(11)
    assert plan.skipped == []


def test_skipped_list_is_capped_with_count() -> None:
    # every-minute job down for 5 hours: 300 ticks after 10:00
    plan = plan_catch_up(EVERY_MINUTE, at(10), CREATED, at(15), GRACE)
    assert plan.run_at == at(15)
    assert len(plan.skipped) == SKIPPED_LIST_CAP == 100
    assert plan.skipped == minutes(at(13, 20), 100)  # the most recent, oldest first
    assert plan.skipped_more == 199
    assert plan.skipped_more_exact
    assert plan.skipped_total == 299
    assert plan.next_run_at == at(15, 1)


def test_skipped_list_cap_when_nothing_runs() -> None:
    plan = plan_catch_up(EVERY_MINUTE, at(10), CREATED, at(15, 0, 30), 0, tolerance_seconds=0)
    assert plan.run_at is None
    assert plan.skipped == minutes(at(13, 21), 100)
    assert plan.skipped_more == 200
    assert plan.skipped_total == 300


def test_scan_budget_exhausted_but_count_still_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "_SCAN_BUDGET", 50)
    # 120 due ticks: 50 counted one by one, the rest found by looking back from now
    plan = plan_catch_up(EVERY_MINUTE, at(10), CREATED, at(12), GRACE)
    assert plan.run_at == at(12)
    assert plan.skipped == minutes(at(10, 20), 100)
    assert plan.skipped_more == 19
    assert plan.skipped_more_exact


def test_huge_backlog_gives_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "_SCAN_BUDGET", 500)
    # 30 days of an every-minute job: 43200 due ticks
    now = at(10, day=31)
    plan = plan_catch_up(EVERY_MINUTE, at(10, day=1), CREATED, now, GRACE)
    assert plan.run_at == now
    assert plan.skipped == minutes(now - timedelta(minutes=100), 100)
    assert not plan.skipped_more_exact
    assert 500 <= plan.skipped_more < 43_200 - 101
    assert plan.next_run_at == now + timedelta(minutes=1)


def test_clock_stepped_back_does_not_refire() -> None:
    plan = plan_catch_up(HOURLY, at(12), CREATED, at(11, 30), GRACE)
    assert plan.run_at is None
    assert plan.skipped == []
    assert plan.next_run_at == at(13)


def test_fall_back_ambiguous_tick_is_planned_once() -> None:
    berlin = CronSchedule(type="cron", cron="30 2 * * *", timezone="Europe/Berlin")
    last = datetime(2025, 10, 25, 0, 30, tzinfo=UTC)
    now = datetime(2025, 10, 26, 3, 0, tzinfo=UTC)  # after both 02:30s
    plan = plan_catch_up(berlin, last, CREATED, now, GRACE)
    assert plan.run_at is None
    assert plan.skipped == [datetime(2025, 10, 26, 0, 30, tzinfo=UTC)]
    assert plan.next_run_at == datetime(2025, 10, 27, 1, 30, tzinfo=UTC)


def test_works_with_a_validated_spec() -> None:
    spec = validate_job_spec(
        {
            "name": "n",
            "schedule": {"type": "cron", "cron": "*/15 * * * *", "timezone": "Asia/Kolkata"},
            "task_type": "text",
            "text": "t",
            "runtime": {"misfire_grace_seconds": 60},
        },
        now=at(9),
    )
    plan = plan_catch_up(
        spec.schedule, None, at(9), at(9, 30, 30), spec.runtime.misfire_grace_seconds
    )
    assert plan.run_at == at(9, 30)
    assert plan.skipped == [at(9, 15)]
    assert plan.next_run_at == at(9, 45)


# --------------------------------------------------------------------------- once jobs


ONCE = OnceSchedule(type="once", run_at=at(12))


def test_once_not_yet_due() -> None:
    assert plan_catch_up(ONCE, None, at(9), at(11), GRACE) == CatchUp(
        run_at=None, skipped=[], next_run_at=at(12)
    )


def test_once_missed_within_grace_runs() -> None:
    assert plan_catch_up(ONCE, None, at(9), at(12, 4), GRACE) == CatchUp(
        run_at=at(12), skipped=[], next_run_at=None
    )


def test_once_missed_beyond_grace_is_skipped() -> None:
    assert plan_catch_up(ONCE, None, at(9), at(13), GRACE) == CatchUp(
        run_at=None, skipped=[at(12)], next_run_at=None
    )


def test_once_already_handled() -> None:
    assert plan_catch_up(ONCE, at(12), at(9), at(12, 1), GRACE) == CatchUp(
        run_at=None, skipped=[], next_run_at=None
    )


def test_once_moved_later_after_firing_is_due_again() -> None:
    assert plan_catch_up(ONCE, at(8), at(9), at(11), GRACE).next_run_at == at(12)
    assert plan_catch_up(ONCE, at(8), at(9), at(12, 1), GRACE).run_at == at(12)


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("last_fire", "created_at", "now"),
    [
        (None, datetime(2025, 1, 1), at(12)),
        (None, CREATED, datetime(2025, 1, 6, 12)),
        (datetime(2025, 1, 6, 10), CREATED, at(12)),
    ],
)
def test_naive_datetimes_rejected(
    last_fire: datetime | None, created_at: datetime, now: datetime
) -> None:
    with pytest.raises(ValueError, match="aware"):
        plan_catch_up(HOURLY, last_fire, created_at, now, GRACE)


@pytest.mark.parametrize("grace", [-1.0, float("nan"), float("inf")])
def test_bad_grace_rejected(grace: float) -> None:
    with pytest.raises(ValueError, match="grace_seconds"):
        plan_catch_up(HOURLY, None, CREATED, at(12), grace)
