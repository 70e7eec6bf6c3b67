"""Cron jobs and their run history.

Exactly-once firing across processes rests on one statement: a scheduler claims a
job's due ticks with ``UPDATE cron_jobs ... WHERE id = ? AND revision = ?`` and only
the process whose update touched the row goes on to record and start the run.  The
conditional update takes the row's write lock first (SQLite: the database write lock;
Postgres: the row lock), so everything after it in the same transaction sees the state
the claim was made against.  The unique ``(job_id, scheduled_for)`` index on runs is a
second guard: a tick can never be recorded twice.

All times are epoch seconds, as everywhere in the store.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tether.store.database import Database
from tether.store.owners import owned_by
from tether.store.records import CronJobRecord, CronRunRecord
from tether.store.rows import to_record
from tether.store.tables import cron_jobs, cron_runs, remembered_rules

ManualStart = Literal["started", "busy", "missing"]
BUSY = "the previous run was still in progress"
#: Runs kept per job; older finished ones are dropped as new ones are recorded, so a
#: per-minute job (or a long downtime's skipped ticks) cannot grow the table forever.
HISTORY_KEEP = 1000


@dataclass(frozen=True)
class NewRun:
    """A run row to insert: the tick it is for (None: manual) and its first status."""

    id: str
    trigger: str
    scheduled_for: float | None
    status: str
    error: str | None = None


@dataclass(frozen=True)
class TickClaim:
    """What a scheduler decided for one job's due ticks at ``now``.

    ``last_fire`` is the latest tick handled by this claim (None: keep the stored one),
    ``runs`` the rows to record (skipped ticks, then at most one run to start).
    """

    owner: str
    now: float
    next_run_at: float | None
    last_fire: float | None
    runs: Sequence[NewRun] = field(default_factory=tuple)


class CronRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    # ----------------------------------------------------------------- jobs

    async def create(
        self,
        job_id: str,
        spec: dict[str, Any],
        enabled: bool,
        now: float,
        next_run_at: float | None,
    ) -> bool:
        """Insert a job; False if the id is taken (also by a concurrent insert)."""
        try:
            async with self._db.write() as conn:
                await conn.execute(
                    cron_jobs.insert().values(
                        id=job_id,
                        spec=spec,
                        enabled=enabled,
                        revision=1,
                        schedule_since=now,
                        last_fire=None,
                        next_run_at=next_run_at,
                        claimed_by=None,
                        created_at=now,
                        updated_at=now,
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    async def get(self, job_id: str) -> CronJobRecord | None:
        async with self._db.read() as conn:
            row = (await conn.execute(sa.select(cron_jobs).where(cron_jobs.c.id == job_id))).first()
            return to_record(CronJobRecord, row) if row else None

    async def list_jobs(self) -> list[CronJobRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(sa.select(cron_jobs).order_by(cron_jobs.c.created_at))
            return [to_record(CronJobRecord, r) for r in rows]

    async def update(self, job_id: str, now: float, **values: Any) -> bool:
        """Change a job's columns (spec, enabled, schedule_since, next_run_at); bumps its
        revision so that a tick planned from the old state cannot be claimed."""
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.update(cron_jobs)
                .where(cron_jobs.c.id == job_id)
                .values(revision=cron_jobs.c.revision + 1, updated_at=now, **values)
            )
            return result.rowcount == 1

    async def delete(self, job_id: str, forget_session: str | None = None) -> bool:
        """Remove a job and its history, and the decisions remembered for
        ``forget_session`` (the job's own session)."""
        async with self._db.write() as conn:
            await conn.execute(sa.delete(cron_runs).where(cron_runs.c.job_id == job_id))
            if forget_session is not None:
                await conn.execute(
                    sa.delete(remembered_rules).where(
                        remembered_rules.c.session_id == forget_session
                    )
                )
            result = await conn.execute(sa.delete(cron_jobs).where(cron_jobs.c.id == job_id))
            return result.rowcount == 1

    async def due(self, now: float) -> list[CronJobRecord]:
        """Enabled jobs whose next tick is at or before ``now``."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(cron_jobs)
                .where(cron_jobs.c.enabled.is_(True), cron_jobs.c.next_run_at <= now)
                .order_by(cron_jobs.c.next_run_at)
            )
            return [to_record(CronJobRecord, r) for r in rows]

    async def earliest_next_run(self) -> float | None:
        """The soonest tick of any enabled job."""
        async with self._db.read() as conn:
            value = await conn.scalar(
                sa.select(sa.func.min(cron_jobs.c.next_run_at)).where(cron_jobs.c.enabled.is_(True))
            )
            return None if value is None else float(value)

    # ----------------------------------------------------------------- claiming runs

    async def claim_tick(self, job_id: str, revision: int, claim: TickClaim) -> list[str] | None:
        """Record the claim if the job is still at ``revision``.

        Returns None if another change or process got there first, else the ids of the
        runs recorded as ``running``.  A run planned as ``running`` is recorded as
        ``skipped`` instead while the job has a run in progress (one at a time).
        """
        values: dict[str, Any] = {
            "revision": revision + 1,
            "next_run_at": claim.next_run_at,
            "claimed_by": claim.owner,
        }
        if claim.last_fire is not None:
            values["last_fire"] = claim.last_fire
        async with self._db.write() as conn:
            won = await conn.execute(
                sa.update(cron_jobs)
                .where(cron_jobs.c.id == job_id, cron_jobs.c.revision == revision)
                .values(**values)
            )
            if won.rowcount != 1:
                return None
            busy = await _has_running(conn, job_id)
            started: list[str] = []
            for run in claim.runs:
                if run.status == "running" and busy:
                    run = replace(run, status="skipped", error=BUSY)
                elif run.status == "running":
                    started.append(run.id)
                await _insert_run(conn, job_id, run, claim.now, claim.owner)
            await _prune(conn, job_id)
            return started

    async def start_manual(self, job_id: str, run_id: str, now: float, owner: str) -> ManualStart:
        """Record a manual run unless the job is unknown or already running."""
        async with self._db.write() as conn:
            # Touch the row first: it takes the write lock, so the busy check below
            # cannot race another process starting a run of the same job.
            touched = await conn.execute(
                sa.update(cron_jobs)
                .where(cron_jobs.c.id == job_id)
                .values(revision=cron_jobs.c.revision + 1)
            )
            if touched.rowcount != 1:
                return "missing"
            if await _has_running(conn, job_id):
                return "busy"
            await _insert_run(conn, job_id, NewRun(run_id, "manual", None, "running"), now, owner)
            await _prune(conn, job_id)
            return "started"

    async def set_run_task(self, run_id: str, task_id: str) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                sa.update(cron_runs).where(cron_runs.c.id == run_id).values(task_id=task_id)
            )

    async def finish_run(self, run_id: str, status: str, error: str | None, now: float) -> bool:
        """Record the run's end, unless it has one: the first end stands (a survivor may
        have ended it "node lost" while its node was cut off). False if another end
        stands; True also for a run that is gone (its job deleted meanwhile)."""
        async with self._db.write() as conn:
            done = await conn.execute(
                sa.update(cron_runs)
                .where(cron_runs.c.id == run_id, cron_runs.c.status == "running")
                .values(status=status, error=error, finished_at=now)
            )
            if done.rowcount:
                return True
            gone = sa.select(cron_runs.c.id).where(cron_runs.c.id == run_id)
            return await conn.scalar(gone) is None

    async def running_owners(self) -> set[str | None]:
        """The owners (servers) of runs in progress."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(cron_runs.c.claimed_by).where(cron_runs.c.status == "running").distinct()
            )
            return {r.claimed_by for r in rows}

    async def take_over_runs(
        self, task_ids: Collection[str], owners: Collection[str | None], owner: str
    ) -> list[CronRunRecord]:
        """After a restart: the runs ``owners`` (servers that are gone) left in progress
        whose turn this server took up again (``task_ids``) become ``owner``'s; returns
        those it changed (another server recovering the same owners changes each at
        most once, in one statement)."""
        if not task_ids:
            return []
        async with self._db.write() as conn:
            rows = await conn.execute(
                sa.update(cron_runs)
                .where(
                    cron_runs.c.status == "running",
                    owned_by(cron_runs.c.claimed_by, owners),
                    cron_runs.c.task_id.in_(list(task_ids)),
                )
                .values(claimed_by=owner)
                .returning(*cron_runs.c)
            )
            return [to_record(CronRunRecord, r) for r in rows.all()]

    async def fail_running(
        self, reason: str, now: float, owners: Collection[str | None]
    ) -> list[tuple[str, str]]:
        """After a restart: the runs ``owners`` (servers that are gone) left in progress
        are recorded as failed; returns the (job id, run id) of those it changed."""
        async with self._db.write() as conn:
            rows = await conn.execute(
                sa.update(cron_runs)
                .where(cron_runs.c.status == "running", owned_by(cron_runs.c.claimed_by, owners))
                .values(status="error", error=reason, finished_at=now)
                .returning(cron_runs.c.job_id, cron_runs.c.id)
            )
            return [(r.job_id, r.id) for r in rows.all()]

    # ----------------------------------------------------------------- history

    async def history(self, job_id: str, limit: int = 100) -> list[CronRunRecord]:
        """Runs newest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(cron_runs)
                .where(cron_runs.c.job_id == job_id)
                .order_by(
                    cron_runs.c.started_at.desc(),
                    sa.func.coalesce(cron_runs.c.scheduled_for, cron_runs.c.started_at).desc(),
                )
                .limit(limit)
            )
            return [to_record(CronRunRecord, r) for r in rows]

    async def turns_elsewhere(self, job_id: str, owner: str) -> list[str]:
        """The tasks (turns) of the job's runs in progress that another server claimed."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(cron_runs.c.task_id).where(
                    cron_runs.c.job_id == job_id,
                    cron_runs.c.status == "running",
                    cron_runs.c.task_id.is_not(None),
                    cron_runs.c.claimed_by.is_distinct_from(owner),
                )
            )
            return [r.task_id for r in rows]

    async def get_run(self, run_id: str) -> CronRunRecord | None:
        async with self._db.read() as conn:
            row = (await conn.execute(sa.select(cron_runs).where(cron_runs.c.id == run_id))).first()
            return to_record(CronRunRecord, row) if row else None


async def _has_running(conn: AsyncConnection, job_id: str) -> bool:
    row = await conn.execute(
        sa.select(cron_runs.c.id)
        .where(cron_runs.c.job_id == job_id, cron_runs.c.status == "running")
        .limit(1)
    )
    return row.first() is not None


async def _insert_run(
    conn: AsyncConnection, job_id: str, run: NewRun, now: float, owner: str
) -> None:
    finished = None if run.status == "running" else now
    await conn.execute(
        cron_runs.insert().values(
            id=run.id,
            job_id=job_id,
            trigger=run.trigger,
            scheduled_for=run.scheduled_for,
            status=run.status,
            started_at=now,
            finished_at=finished,
            task_id=None,
            error=run.error,
            claimed_by=owner,
        )
    )


async def _prune(conn: AsyncConnection, job_id: str) -> None:
    newest = (
        sa.select(cron_runs.c.id)
        .where(cron_runs.c.job_id == job_id)
        .order_by(cron_runs.c.started_at.desc())
        .limit(HISTORY_KEEP)
    )
    await conn.execute(
        sa.delete(cron_runs).where(
            cron_runs.c.job_id == job_id,
            cron_runs.c.status != "running",
            cron_runs.c.id.not_in(newest.scalar_subquery()),
        )
    )
