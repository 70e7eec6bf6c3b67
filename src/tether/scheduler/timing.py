"""Fire-time arithmetic and misfire planning for cron jobs.

Pure functions over :mod:`tether.scheduler.models` schedules.  All inputs must be
aware datetimes; all outputs are aware datetimes in UTC.

Cron semantics
--------------
Cron fields match *wall-clock* time in the job's zone; croniter does the
matching and the DST handling, this module only adds one rule on top.

* An expression whose hour field is ``*`` (``*/15 * * * *``, ``0 * * * *``)
  follows elapsed time: minutes that do not exist in a spring-forward gap simply
  do not happen, and in a fall-back overlap it fires in both passes, so it keeps
  running every N minutes.
* Any other expression (a specific hour: daily, weekly, monthly jobs) fires once
  per matching wall-clock time.  A time inside a spring-forward gap (02:30 on the
  Europe/Berlin change day) fires at the first instant after the gap (03:00
  CEST); several gap times coalesce into that one run.  An ambiguous time in a
  fall-back overlap fires at its first occurrence only, never twice.

Misfires
--------
:func:`plan_catch_up` decides what to do for the ticks that came due while the
scheduler was not looking (downtime, or simply the wake-up for the current tick):
at most one run — the latest due tick, if it is within the job's grace — and every
other due tick is reported as skipped.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final

from croniter import CroniterBadDateError, croniter

from tether.scheduler.models import OnceSchedule, Schedule

__all__ = [
    "ON_TIME_TOLERANCE_SECONDS",
    "SKIPPED_LIST_CAP",
    "CatchUp",
    "iter_fire_times",
    "next_fire",
    "plan_catch_up",
]

#: At most this many skipped ticks are listed in :attr:`CatchUp.skipped`.
SKIPPED_LIST_CAP: Final = 100
#: Scheduling latency forgiven on top of a job's grace, so that a job with a grace of
#: 0 still runs when the scheduler wakes up a few milliseconds after its tick.
ON_TIME_TOLERANCE_SECONDS: Final = 1.0
#: How many due ticks :func:`plan_catch_up` counts one by one before it stops
#: counting exactly and only looks for the most recent ones (about 0.5 s of croniter).
_SCAN_BUDGET: Final = 20_000
_HOUR_FIELD: Final = 1


def _require_aware(name: str, value: datetime) -> None:
    if value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, got naive {value!r}")


@functools.lru_cache(maxsize=1024)
def _follows_elapsed_time(expr: str) -> bool:
    """True when the hour field is a wildcard (croniter expands it to ``['*']``)."""
    expanded, _nth_weekday = croniter.expand(expr)
    return bool(expanded[_HOUR_FIELD] == ["*"])


def _is_repeated_wall_time(local: datetime) -> bool:
    """True if ``local`` is the *second* occurrence of an ambiguous wall time."""
    zone: tzinfo | None = local.tzinfo
    naive = local.replace(tzinfo=None)
    first = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    # PEP 495: in an overlap fold=1 is the later instant; in a gap it is the earlier.
    return first < second and local.astimezone(UTC) == second


def _iter_cron(expr: str, zone: tzinfo, after: datetime) -> Iterator[datetime]:
    once_per_wall_time = not _follows_elapsed_time(expr)
    it = croniter(expr, after.astimezone(zone))
    last = after
    while True:
        try:
            local: datetime = it.get_next(datetime)
        except CroniterBadDateError:  # no further match (cannot happen for validated jobs)
            return
        if once_per_wall_time and _is_repeated_wall_time(local):
            continue
        fire = local.astimezone(UTC)
        if fire <= last:  # belt and braces: strictly increasing, never a duplicate
            continue
        last = fire
        yield fire


def iter_fire_times(schedule: Schedule, after: datetime) -> Iterator[datetime]:
    """Yield the schedule's fire times strictly after ``after``, in order, as UTC.

    Infinite for cron schedules; at most one item for ``once``.
    """
    _require_aware("after", after)  # eagerly, not on the first next()
    if isinstance(schedule, OnceSchedule):
        run_at = schedule.run_at.astimezone(UTC)
        return iter([run_at] if run_at > after else [])
    return _iter_cron(schedule.cron, schedule.zone(), after)


def next_fire(schedule: Schedule, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after`` (UTC), or None if there is none.

    None means a ``once`` job whose time is not after ``after``.
    """
    return next(iter_fire_times(schedule, after), None)


@dataclass(frozen=True)
class CatchUp:
    """What to do about the ticks that are due now.

    ``run_at``: the single due tick to run now (the latest one, if within grace).
    ``skipped``: the most recent other due ticks, oldest first, to record as
    skipped; at most :data:`SKIPPED_LIST_CAP` of them.
    ``next_run_at``: the next tick strictly after ``now`` (None: nothing left).
    ``skipped_more``: further (older) skipped ticks not listed in ``skipped``.
    ``skipped_more_exact``: False when there were so many due ticks that
    ``skipped_more`` is only a lower bound.
    """

    run_at: datetime | None
    skipped: list[datetime] = field(default_factory=list)
    next_run_at: datetime | None = None
    skipped_more: int = 0
    skipped_more_exact: bool = True

    @property
    def skipped_total(self) -> int:
        """All skipped ticks (a lower bound when ``skipped_more_exact`` is False)."""
        return len(self.skipped) + self.skipped_more


def plan_catch_up(
    schedule: Schedule,
    last_fire: datetime | None,
    created_at: datetime,
    now: datetime,
    grace_seconds: float,
    *,
    tolerance_seconds: float = ON_TIME_TOLERANCE_SECONDS,
) -> CatchUp:
    """Plan the due ticks of one job at ``now``.

    ``last_fire`` is the scheduled time of the last tick already handled (run or
    recorded as skipped), None if none was.  ``created_at`` is when the job — or
    its current schedule — came into being; cron ticks at or before it, or at or
    before ``last_fire``, are never due.  A ``once`` job is due when ``run_at <= now``
    unless ``last_fire >= run_at`` (``created_at`` is irrelevant: its time was
    checked against the clock when it was submitted).

    The due ticks lie in ``(max(created_at, last_fire), now]``.  The latest one is
    run if ``now - tick <= grace_seconds + tolerance_seconds``; all others — and
    the latest one too when it is beyond the grace — are skipped.  A job never
    runs more than once per call however many ticks it missed.  Whether the job
    is enabled is the caller's business.
    """
    for name, value in (("created_at", created_at), ("now", now)):
        _require_aware(name, value)
    if last_fire is not None:
        _require_aware("last_fire", last_fire)
    if not (math.isfinite(grace_seconds) and grace_seconds >= 0):
        raise ValueError(f"grace_seconds must be finite and >= 0, got {grace_seconds!r}")
    if not (math.isfinite(tolerance_seconds) and tolerance_seconds >= 0):
        raise ValueError(f"tolerance_seconds must be finite and >= 0, got {tolerance_seconds!r}")
    window = timedelta(seconds=grace_seconds + tolerance_seconds)

    if isinstance(schedule, OnceSchedule):
        run_at = schedule.run_at.astimezone(UTC)
        if last_fire is not None and last_fire >= run_at:
            return CatchUp(run_at=None)
        if run_at > now:
            return CatchUp(run_at=None, next_run_at=run_at)
        return _decide([run_at], 0, True, now, window, None)

    anchor = created_at if last_fire is None else max(created_at, last_fire)
    due, older, exact = _latest_due_ticks(schedule, anchor, now, SKIPPED_LIST_CAP + 1)
    # After a clock step backwards ``now`` may precede ``anchor``: never re-fire a tick.
    next_run_at = next_fire(schedule, max(now, anchor))
    return _decide(due, older, exact, now, window, next_run_at)


def _decide(
    due: list[datetime],
    older: int,
    exact: bool,
    now: datetime,
    window: timedelta,
    next_run_at: datetime | None,
) -> CatchUp:
    skipped = list(due)
    run_at = skipped.pop() if due and now - due[-1] <= window else None
    overflow = max(0, len(skipped) - SKIPPED_LIST_CAP)
    return CatchUp(
        run_at=run_at,
        skipped=skipped[overflow:],
        next_run_at=next_run_at,
        skipped_more=older + overflow,
        skipped_more_exact=exact,
    )


def _scan(
    schedule: Schedule, start: datetime, end: datetime, keep: int, budget: int | None
) -> tuple[deque[datetime], int, bool]:
    """Walk ticks in ``(start, end]``: (last ``keep`` ticks, ticks seen, reached ``end``)."""
    tail: deque[datetime] = deque(maxlen=keep)
    seen = 0
    for tick in iter_fire_times(schedule, start):
        if tick > end:
            return tail, seen, True
        if budget is not None and seen >= budget:
            return tail, seen, False
        tail.append(tick)
        seen += 1
    return tail, seen, True


def _latest_due_ticks(
    schedule: Schedule, anchor: datetime, now: datetime, keep: int
) -> tuple[list[datetime], int, bool]:
    """The latest ``keep`` ticks in ``(anchor, now]`` (oldest first), how many earlier
    ticks there are in that interval, and whether that count is exact."""
    tail, seen, complete = _scan(schedule, anchor, now, keep, _SCAN_BUDGET)
    if complete:
        return list(tail), seen - len(tail), True
    # Far too many due ticks to walk them all (a per-minute job after weeks of
    # downtime).  Stop counting; look back from ``now`` in growing windows until one
    # holds ``keep`` ticks or reaches the part already counted.
    counted_until = tail[-1]
    span = timedelta(hours=1)
    while True:
        start = max(counted_until, now - span)
        recent, in_window, _ = _scan(schedule, start, now, keep, None)
        if in_window >= keep or start == counted_until:
            break
        span *= 8
    if start == counted_until:  # the windows met the counted part: the count is exact
        latest = [*tail, *recent][-keep:]
        return latest, seen + in_window - len(latest), True
    return list(recent), seen + in_window - len(recent), False
