"""Fire-time arithmetic (tether.scheduler.timing.next_fire / iter_fire_times)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from tether.scheduler.models import CronSchedule, OnceSchedule
from tether.scheduler.timing import iter_fire_times, next_fire

MINUTE = timedelta(minutes=1)


def cron(expr: str, zone: str = "UTC") -> CronSchedule:
    return CronSchedule(type="cron", cron=expr, timezone=zone)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def fires(schedule: CronSchedule, after: datetime, count: int) -> list[datetime]:
    return list(itertools.islice(iter_fire_times(schedule, after), count))


# --------------------------------------------------------------------------- plain cases


@pytest.mark.parametrize(
    ("expr", "zone", "after", "expected"),
    [
        ("*/15 * * * *", "UTC", utc(2025, 1, 6, 10, 7), utc(2025, 1, 6, 10, 15)),
        ("*/15 * * * *", "UTC", utc(2025, 1, 6, 10, 15), utc(2025, 1, 6, 10, 30)),  # strictly after
        ("*/15 * * * *", "UTC", utc(2025, 1, 6, 10, 14, 59), utc(2025, 1, 6, 10, 15)),
        ("*/15 * * * *", "UTC", utc(2025, 1, 6, 23, 50), utc(2025, 1, 7, 0, 0)),
        ("0 9 * * *", "UTC", utc(2025, 1, 6, 9, 0, 0), utc(2025, 1, 7, 9, 0)),
        # weekdays only: Friday 2025-01-10 after 09:00 -> Monday 2025-01-13
        ("0 9 * * 1-5", "UTC", utc(2025, 1, 10, 9, 30), utc(2025, 1, 13, 9, 0)),
        ("30 8 * * mon", "UTC", utc(2025, 1, 6, 8, 30), utc(2025, 1, 13, 8, 30)),
        # monthly, across a year boundary
        ("0 0 1 * *", "UTC", utc(2025, 12, 15), utc(2026, 1, 1)),
        ("0 6 L * *", "UTC", utc(2025, 2, 1), utc(2025, 2, 28, 6)),
        # 29 February only in leap years
        ("0 12 29 2 *", "UTC", utc(2025, 1, 1), utc(2028, 2, 29, 12)),
        # day-of-month OR day-of-week, as in Vixie cron
        ("0 0 13 * fri", "UTC", utc(2025, 6, 1), utc(2025, 6, 6)),
        # zones with fractional offsets
        ("0 9 * * *", "Asia/Kolkata", utc(2025, 1, 1), utc(2025, 1, 1, 3, 30)),
        ("0 9 * * *", "Asia/Kathmandu", utc(2025, 1, 1), utc(2025, 1, 1, 3, 15)),
        # the zone's calendar day, not UTC's
        ("0 8 * * 1", "Pacific/Auckland", utc(2025, 1, 5, 12), utc(2025, 1, 5, 19)),
    ],
)
def test_next_fire(expr: str, zone: str, after: datetime, expected: datetime) -> None:
    result = next_fire(cron(expr, zone), after)
    assert result == expected
    assert result is not None
    assert result.tzinfo is UTC


def test_after_may_be_in_any_offset() -> None:
    after = datetime(2025, 1, 6, 11, 7, tzinfo=ZoneInfo("Europe/Berlin"))  # 10:07Z
    assert next_fire(cron("*/15 * * * *"), after) == utc(2025, 1, 6, 10, 15)


def test_naive_after_is_rejected() -> None:
    with pytest.raises(ValueError, match="aware"):
        next_fire(cron("* * * * *"), datetime(2025, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        iter_fire_times(cron("* * * * *"), datetime(2025, 1, 1))


def test_iter_fire_times_is_strictly_increasing() -> None:
    times = fires(cron("*/5 * * * *", "Europe/Berlin"), utc(2025, 10, 25, 22), 60)
    assert all(b - a == timedelta(minutes=5) for a, b in itertools.pairwise(times))


# --------------------------------------------------------------------------- once


def test_once() -> None:
    run_at = datetime(2030, 1, 1, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    schedule = OnceSchedule(type="once", run_at=run_at)
    result = next_fire(schedule, utc(2029, 1, 1))
    assert result == utc(2030, 1, 1, 8, 0)
    assert result is not None
    assert result.tzinfo is UTC
    assert next_fire(schedule, run_at) is None
    assert next_fire(schedule, utc(2031, 1, 1)) is None
    assert list(iter_fire_times(schedule, utc(2029, 1, 1))) == [utc(2030, 1, 1, 8)]


# --------------------------------------------------------------------------- DST


def test_new_york_nine_am_across_spring_forward() -> None:
    # EST (-05:00) until 2025-03-09 02:00, then EDT (-04:00).
    times = fires(cron("0 9 * * *", "America/New_York"), utc(2025, 3, 7, 12), 4)
    assert times == [
        utc(2025, 3, 7, 14),
        utc(2025, 3, 8, 14),
        utc(2025, 3, 9, 13),
        utc(2025, 3, 10, 13),
    ]


def test_new_york_nine_am_across_fall_back() -> None:
    times = fires(cron("0 9 * * *", "America/New_York"), utc(2025, 11, 1, 0), 3)
    assert times == [utc(2025, 11, 1, 13), utc(2025, 11, 2, 14), utc(2025, 11, 3, 14)]


def test_spring_forward_gap_time_runs_right_after_the_gap() -> None:
    # Europe/Berlin 2025-03-30: 02:00 CET -> 03:00 CEST, so 02:30 does not exist.
    times = fires(cron("30 2 * * *", "Europe/Berlin"), utc(2025, 3, 28, 12), 3)
    assert times == [
        utc(2025, 3, 29, 1, 30),  # 02:30 CET
        utc(2025, 3, 30, 1, 0),  # 03:00 CEST, the first instant after the gap
        utc(2025, 3, 31, 0, 30),  # 02:30 CEST
    ]


def test_several_gap_times_coalesce_into_one_run() -> None:
    times = fires(cron("15,45 2 * * *", "Europe/Berlin"), utc(2025, 3, 29, 12), 3)
    assert times == [utc(2025, 3, 30, 1, 0), utc(2025, 3, 31, 0, 15), utc(2025, 3, 31, 0, 45)]


def test_interval_job_skips_nonexistent_minutes() -> None:
    times = fires(cron("*/15 * * * *", "Europe/Berlin"), utc(2025, 3, 30, 0, 0), 8)
    # wall clock: 01:15 01:30 01:45 03:00 03:15 ... -- every 15 real minutes
    assert times == [utc(2025, 3, 30, 0, 15) + i * timedelta(minutes=15) for i in range(8)]


def test_fall_back_ambiguous_time_fires_once() -> None:
    # Europe/Berlin 2025-10-26: 03:00 CEST -> 02:00 CET, so 02:30 happens twice.
    schedule = cron("30 2 * * *", "Europe/Berlin")
    times = fires(schedule, utc(2025, 10, 24, 12), 3)
    assert times == [
        utc(2025, 10, 25, 0, 30),
        utc(2025, 10, 26, 0, 30),  # first 02:30 (CEST) only
        utc(2025, 10, 27, 1, 30),
    ]
    # asked from inside the repeated hour, it does not fire the second 02:30 either
    assert next_fire(schedule, utc(2025, 10, 26, 1, 10)) == utc(2025, 10, 27, 1, 30)


def test_fall_back_in_new_york() -> None:
    # 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST).
    times = fires(cron("30 1 * * *", "America/New_York"), utc(2025, 11, 1, 12), 2)
    assert times == [utc(2025, 11, 2, 5, 30), utc(2025, 11, 3, 6, 30)]


def test_interval_job_runs_through_the_repeated_hour() -> None:
    times = fires(cron("*/15 * * * *", "Europe/Berlin"), utc(2025, 10, 25, 23, 45), 13)
    # 02:00..02:45 CEST, then 02:00..02:45 CET again: every 15 real minutes
    assert times == [utc(2025, 10, 26, 0, 0) + i * timedelta(minutes=15) for i in range(13)]


def test_hourly_job_runs_every_real_hour_across_both_changes() -> None:
    schedule = cron("0 * * * *", "Europe/Berlin")
    for start in (utc(2025, 3, 29, 20), utc(2025, 10, 25, 20)):
        times = fires(schedule, start, 12)
        assert times == [start + i * timedelta(hours=1) for i in range(1, 13)]


# --------------------------------------------------------------------------- reference check


def reference_fires(expr: str, zone_key: str, start: datetime, end: datetime) -> list[datetime]:
    """Brute force, minute by minute: the documented semantics, spelled out.

    croniter (naive, no zone) lists the matching wall-clock minutes; every UTC
    minute in ``[start, end)`` is then checked against that set.
    """
    zone = ZoneInfo(zone_key)
    hour_is_wildcard = croniter.expand(expr)[0][1] == ["*"]
    wall_lo = start.astimezone(zone).replace(tzinfo=None) - timedelta(days=1)
    wall_hi = end.astimezone(zone).replace(tzinfo=None) + timedelta(days=1)
    matching: set[datetime] = set()
    walls = croniter(expr, wall_lo - MINUTE)
    while (wall := walls.get_next(datetime)) <= wall_hi:
        matching.add(wall)

    result = []
    prev_wall = (start - MINUTE).astimezone(zone).replace(tzinfo=None)
    instant = start
    while instant < end:
        local = instant.astimezone(zone)
        wall = local.replace(tzinfo=None)
        # a daily-style job fires at the first occurrence of an ambiguous time only
        fire = wall in matching and (hour_is_wildcard or local.fold == 0)
        if not hour_is_wildcard and wall - prev_wall > MINUTE:
            # the clock jumped forward: matching times inside the gap run now
            skipped = (prev_wall + k * MINUTE for k in range(1, (wall - prev_wall) // MINUTE))
            fire = fire or any(w in matching for w in skipped)
        if fire:
            result.append(instant)
        prev_wall = wall
        instant += MINUTE
    return result


TRANSITIONS = [
    ("Europe/Berlin", utc(2025, 3, 30, 1)),
    ("Europe/Berlin", utc(2025, 10, 26, 1)),
    ("America/New_York", utc(2025, 3, 9, 7)),
    ("America/New_York", utc(2025, 11, 2, 6)),
    ("Australia/Lord_Howe", utc(2025, 4, 5, 15)),  # 30-minute DST shift
    ("Australia/Lord_Howe", utc(2025, 10, 4, 15, 30)),
    ("Europe/Dublin", utc(2025, 10, 26, 1)),  # "negative DST" in tzdata
    ("America/Santiago", utc(2025, 4, 6, 3)),  # change at midnight
    ("America/Santiago", utc(2025, 9, 7, 4)),
    ("Pacific/Apia", utc(2011, 12, 30, 10)),  # a whole day skipped
]
EXPRESSIONS = [
    "*/15 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 2 * * *",
    "15,45 1-3 * * *",
    "0 */2 * * *",
    "*/20 2 * * *",
    "0 0 * * *",
    "59 23 * * *",
]


@pytest.mark.parametrize(("zone", "transition"), TRANSITIONS)
def test_matches_brute_force_reference_around_transitions(zone: str, transition: datetime) -> None:
    start, end = transition - timedelta(hours=30), transition + timedelta(hours=30)
    for expr in EXPRESSIONS:
        schedule = cron(expr, zone)
        expected = reference_fires(expr, zone, start, end)
        got = list(
            itertools.takewhile(lambda t: t < end, iter_fire_times(schedule, start - MINUTE))
        )
        assert got == expected, expr
        # single steps from arbitrary points (including inside gaps/overlaps) agree
        for probe in [*(start + k * timedelta(minutes=29) for k in range(125)), *expected]:
            later = [t for t in expected if t > probe]
            if later:
                assert next_fire(schedule, probe) == later[0], (expr, probe)
