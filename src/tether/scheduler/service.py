"""The cron loop: claims due ticks, starts their runs, sleeps until the next tick.

:meth:`CronScheduler.tick` is the whole decision for one instant and is public so that
tests drive it with a clock they control; :meth:`CronScheduler.start` runs it in a loop
that sleeps until the earliest ``next_run_at`` and is woken early by job changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from tether.scheduler.clock import Clock, from_epoch, to_epoch
from tether.scheduler.models import STORED_CONTEXT_KEY, JobSpec, OnceSchedule
from tether.scheduler.runner import ResumedRun, RunExecutor
from tether.scheduler.timing import CatchUp, next_fire, plan_catch_up
from tether.store.cron import CronRepository, NewRun, TickClaim
from tether.store.records import CronJobRecord
from tether.waits import event_within

log = logging.getLogger(__name__)

#: Other processes sharing the database may add jobs this one is not told about, so
#: the loop looks again at least this often.
MAX_SLEEP_SECONDS = 30.0
#: Floor on a sleep, so a tick another process keeps winning cannot spin the loop.
MIN_SLEEP_SECONDS = 0.05
#: After a tick that failed for some job, wait at least this long before the next one,
#: so a job that cannot be handled (say, a database error) is retried without spinning.
ERROR_BACKOFF_SECONDS = 5.0
MISSED = "missed: the scheduler was not running within the job's misfire grace"
RESTARTED = "server restarted during the run"


def new_run_id() -> str:
    return uuid.uuid4().hex


def load_spec(record: CronJobRecord) -> JobSpec:
    """A stored job (validated without a clock: its once time may have passed)."""
    return JobSpec.model_validate(record.spec, context={STORED_CONTEXT_KEY: True})


def _loaded(record: CronJobRecord | None) -> JobSpec | None:
    """The stored job, or None if there is none or it no longer validates."""
    if record is None:
        return None
    try:
        return load_spec(record)
    except ValueError:  # pydantic's ValidationError is one
        log.exception("cron job %s: its stored spec does not load", record.id)
        return None


def upcoming(spec: JobSpec, since: datetime, last_fire: datetime | None) -> datetime | None:
    """The next tick of a job whose schedule holds from ``since`` (None: nothing left)."""
    schedule = spec.schedule
    if isinstance(schedule, OnceSchedule):
        done = last_fire is not None and last_fire >= schedule.run_at
        # A time that passed before the schedule held (a pause) is not owed.
        return None if done or schedule.run_at < since else schedule.run_at
    return next_fire(schedule, since if last_fire is None else max(since, last_fire))


def _planned_runs(plan: CatchUp) -> tuple[list[NewRun], str | None]:
    """The run rows for a plan: its skipped ticks, then the run to start (if any)."""
    runs = [
        NewRun(new_run_id(), "scheduled", t.timestamp(), "skipped", MISSED) for t in plan.skipped
    ]
    if runs and plan.skipped_more:
        more = f"{plan.skipped_more}{'' if plan.skipped_more_exact else '+'}"
        runs[0] = replace(runs[0], error=f"{MISSED} (and {more} earlier ticks)")
    run_id = None
    if plan.run_at is not None:
        run_id = new_run_id()
        runs.append(NewRun(run_id, "scheduled", plan.run_at.timestamp(), "running"))
    return runs, run_id


class CronScheduler:
    """Fires due cron ticks exactly once across every process sharing the store."""

    def __init__(
        self,
        repo: CronRepository,
        executor: RunExecutor,
        clock: Clock,
        owner: str | None = None,
    ) -> None:
        self._repo = repo
        self._executor = executor
        self.clock = clock
        #: Identifies this process in the claims it makes (the server's owner id).
        self.owner = owner or uuid.uuid4().hex[:16]
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._inflight: dict[str, tuple[str, asyncio.Task[None]]] = {}
        self._tick_failed = False

    # ------------------------------------------------------------------ the decision

    async def tick(self, now: datetime) -> list[str]:
        """Handle every job due at ``now``; returns the ids of the runs started."""
        started: list[str] = []
        self._tick_failed = False
        for record in await self._repo.due(now.timestamp()):
            try:
                run_id = await self._claim(record, now)
            except Exception:
                log.exception("cron job %s: could not handle its due tick", record.id)
                self._tick_failed = True
                continue
            if run_id is not None:
                started.append(run_id)
        return started

    async def _claim(self, record: CronJobRecord, now: datetime) -> str | None:
        spec = load_spec(record)
        last_fire = from_epoch(record.last_fire)
        plan = plan_catch_up(
            spec.schedule,
            last_fire,
            datetime.fromtimestamp(record.schedule_since, now.tzinfo),
            now,
            spec.runtime.misfire_grace_seconds,
        )
        runs, run_id = _planned_runs(plan)
        handled = [t for t in (plan.run_at, *plan.skipped) if t is not None]
        claim = TickClaim(
            owner=self.owner,
            now=now.timestamp(),
            next_run_at=to_epoch(plan.next_run_at),
            last_fire=max(handled).timestamp() if handled else None,
            runs=runs,
        )
        # Ids and revisions only: these lines let an operator (and the shared-database
        # test) see two processes compete for one tick.
        log.debug("cron job %s: claiming revision %d", record.id, record.revision)
        started = await self._repo.claim_tick(record.id, record.revision, claim)
        if started is None:
            log.debug("cron job %s: revision %d was claimed elsewhere", record.id, record.revision)
            return None
        if run_id not in started:
            return None  # the job was still running: the tick was recorded as skipped
        self.launch(spec, run_id)
        return run_id

    # ------------------------------------------------------------------ runs

    def launch(self, spec: JobSpec, run_id: str, resumed: ResumedRun | None = None) -> None:
        """Carry a recorded ``running`` run through in the background (``resumed``: one
        whose turn a restart took up again)."""
        work = self._executor.execute(spec, run_id, resumed)
        task = asyncio.create_task(work, name=f"cron-{run_id}")
        self._inflight[run_id] = (spec.id or "", task)
        task.add_done_callback(lambda _t: self._inflight.pop(run_id, None))

    async def cancel_runs(self, job_id: str) -> None:
        """Stop the job's runs in progress here (their turns are stopped too), and the
        turns of its runs on other servers (each there ends its run when its turn does)."""
        tasks = [t for j, t in self._inflight.values() if j == job_id]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for task_id in await self._repo.turns_elsewhere(job_id, self.owner):
            await self._executor.stop_turn(task_id)

    async def idle(self) -> None:
        """Wait until every run started here has ended and its end is stored (for
        tests)."""
        while self._inflight:
            await asyncio.gather(
                *(t for _j, t in list(self._inflight.values())), return_exceptions=True
            )
        await self._executor.ends.settled()

    # ------------------------------------------------------------------ the loop

    async def recover(
        self, dead_owners: Collection[str | None], resumed_tasks: Collection[str] = ()
    ) -> None:
        """After a restart no run of a server that is gone claims to be in progress: a
        run whose turn was taken up again here (``resumed_tasks``, with the keeper) is
        followed to its end within what is left of its timeout; the others are recorded
        as errors."""
        taken = await self._repo.take_over_runs(resumed_tasks, dead_owners, self.owner)
        for run in taken:
            assert run.task_id is not None  # taken over by its task
            spec = _loaded(await self._repo.get(run.job_id))
            if spec is None:  # deleted, or no longer a job this version reads
                await self._repo.finish_run(run.id, "error", RESTARTED, self.clock().timestamp())
                self._executor.tell_failed(run.job_id, run.id, "error", RESTARTED)
                continue
            self.launch(spec, run.id, ResumedRun(run.task_id, run.started_at))
            log.info("cron run %s of job %s goes on after the restart", run.id, run.job_id)
        failed = await self._repo.fail_running(RESTARTED, self.clock().timestamp(), dead_owners)
        for job_id, run_id in failed:
            self._executor.tell_failed(job_id, run_id, "error", RESTARTED)
        if failed:
            log.info("marked %d unfinished cron run(s) as error (%s)", len(failed), RESTARTED)

    def start(self) -> None:
        """Run the loop in the background until :meth:`shutdown`."""
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._loop(), name="cron-scheduler")

    def wake(self) -> None:
        """Look at the jobs again now (a job was added or changed)."""
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.tick(self.clock())
                delay = await self._delay()
            except Exception:
                log.exception("cron tick failed")
                self._tick_failed = True
                delay = MAX_SLEEP_SECONDS
            if self._tick_failed:
                delay = max(delay, ERROR_BACKOFF_SECONDS)
            await event_within(self._wake, delay)

    async def _delay(self) -> float:
        earliest = await self._repo.earliest_next_run()
        if earliest is None:
            return MAX_SLEEP_SECONDS
        wait = earliest - self.clock().timestamp()
        return min(MAX_SLEEP_SECONDS, max(MIN_SLEEP_SECONDS, wait))

    def begin_shutdown(self, detach: bool) -> None:
        """From now on a run cancelled here is left in progress with its turn when
        ``detach`` (see :meth:`shutdown`)."""
        self._executor.detaching = detach

    async def shutdown(self, detach: bool = False) -> None:
        """Stop the loop and every run in progress here; with ``detach`` (the keeper
        keeps the calls) a run whose turn is under way is left in progress, its turn
        with it, for the next start to take up."""
        self.begin_shutdown(detach)
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        tasks = [t for _j, t in self._inflight.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # Ends the store still refuses are left to the next start's recovery.
        self._executor.ends.give_up()
