"""Cron job operations behind the HTTP API: create, replace, pause, run now, inspect."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError

from tether.errors import Conflict, Invalid, NotFound
from tether.scheduler.clock import from_epoch, to_epoch
from tether.scheduler.models import JobSpec, default_session_id, validate_job_spec
from tether.scheduler.service import CronScheduler, load_spec, new_run_id, upcoming
from tether.session_ids import routable
from tether.store.cron import CronRepository
from tether.store.records import CronJobRecord, CronRunRecord


class JobNotFound(NotFound):
    """No job has this id."""

    def __init__(self, job_id: str) -> None:
        # QwenPaw's wording for every route.
        super().__init__("job not found")
        self.job_id = job_id


class JobExists(Conflict):
    """A job with this id already exists."""


class JobBusy(Conflict):
    """The job has a run in progress."""


def _validated(data: Mapping[str, object], now: datetime | None) -> JobSpec:
    """The request body as a spec (see ``validate_job_spec``); every problem located as
    request validation does."""
    try:
        spec = validate_job_spec(data, now=now)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        located = [{**e, "loc": ("body", *e["loc"])} for e in errors]
        raise Invalid("invalid cron job", errors=located) from None
    if spec.dispatch is not None:
        try:
            routable(spec.dispatch.target.session_id)
        except ValueError as exc:
            # Here, not in the model: a job stored before loads as it is.
            where = ("body", "dispatch", "target", "session_id")
            error = {"loc": where, "msg": str(exc), "type": "value_error"}
            raise Invalid("invalid cron job", errors=[error]) from None
    return spec


def _with_level(data: Mapping[str, object], level: str) -> Mapping[str, object]:
    """``data`` with ``approval_level`` set to ``level`` unless it has one."""
    return data if "approval_level" in data else {**data, "approval_level": level}


def _keeping_governance(data: Mapping[str, object], old: JobSpec) -> Mapping[str, object]:
    """``data`` with the job's approval level and unattended policy where it names
    neither: a client that knows nothing of them (QwenPaw's) keeps the job's."""
    kept = {"approval_level": old.approval_level, "when_unattended": old.when_unattended}
    return {**{k: v for k, v in kept.items() if k not in data}, **data}


@dataclass(frozen=True)
class JobState:
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None


class CronJobs:
    """The cron API's use cases; every change wakes the scheduler."""

    def __init__(
        self, repo: CronRepository, scheduler: CronScheduler, default_level: str = "auto"
    ) -> None:
        """``default_level``: the approval level of a job created without one (the
        server's TETHER_DEFAULT_APPROVAL_LEVEL, as for a chat)."""
        self._repo = repo
        self.scheduler = scheduler
        self._default_level = default_level

    async def list_jobs(self) -> list[JobSpec]:
        return [load_spec(r) for r in await self._repo.list_jobs()]

    async def get(self, job_id: str) -> JobSpec:
        return load_spec(await self._record(job_id))

    async def create(self, data: Mapping[str, object]) -> JobSpec:
        """Validate and store a new job. Raises Invalid, JobExists."""
        now = self.scheduler.clock()
        spec = _validated(_with_level(data, self._default_level), now)
        spec = spec.with_id(spec.id or str(uuid.uuid4()))
        assert spec.id is not None
        next_run = to_epoch(upcoming(spec, now, None))
        if not await self._repo.create(
            spec.id, _dump(spec), spec.enabled, now.timestamp(), next_run
        ):
            raise JobExists(f"a cron job with id {spec.id!r} already exists")
        self.scheduler.wake()
        return spec

    async def replace(self, job_id: str, data: Mapping[str, object]) -> JobSpec:
        """Replace a job's definition. Raises Invalid, JobNotFound."""
        record = await self._record(job_id)
        now = self.scheduler.clock()
        old = load_spec(record)
        data = _keeping_governance(data, old)
        spec = _validated(data, None)
        if spec.schedule != old.schedule:
            spec = _validated(data, now)  # a new once time must not be in the past
        if spec.id is not None and spec.id != job_id:
            raise Invalid(f"id {spec.id!r} does not match the job {job_id!r}", field="id")
        spec = spec.with_id(job_id)
        # A new schedule, or a job coming back from a pause, starts counting from now:
        # ticks it had before are not owed to it.
        fresh = old.schedule != spec.schedule or (spec.enabled and not record.enabled)
        since = now if fresh else datetime.fromtimestamp(record.schedule_since, now.tzinfo)
        next_run = upcoming(spec, since, from_epoch(record.last_fire))
        await self._save(record, spec, since, next_run)
        return spec

    async def set_enabled(self, job_id: str, enabled: bool) -> JobSpec:
        """Pause or resume a job (a no-op if it already is)."""
        record = await self._record(job_id)
        spec = load_spec(record)
        if record.enabled == enabled:
            return spec
        spec = spec.model_copy(update={"enabled": enabled})
        now = self.scheduler.clock()
        since = now if enabled else datetime.fromtimestamp(record.schedule_since, now.tzinfo)
        await self._save(record, spec, since, upcoming(spec, since, from_epoch(record.last_fire)))
        return spec

    async def delete(self, job_id: str) -> None:
        """Remove a job and its history, stopping a run in progress. Decisions
        remembered for the job's own session go with it, wherever the job points now:
        a job made later under the same id (and so the same session) does not inherit
        them."""
        await self._record(job_id)
        await self.scheduler.cancel_runs(job_id)
        if not await self._repo.delete(job_id, forget_session=default_session_id(job_id)):
            raise JobNotFound(job_id)
        # A tick claimed before the delete may have started a run since.
        await self.scheduler.cancel_runs(job_id)
        self.scheduler.wake()

    async def run_now(self, job_id: str) -> str:
        """Start a manual run; returns its id. Raises JobNotFound, JobBusy."""
        spec = await self.get(job_id)
        run_id = new_run_id()
        now = self.scheduler.clock().timestamp()
        outcome = await self._repo.start_manual(job_id, run_id, now, self.scheduler.owner)
        if outcome == "missing":
            raise JobNotFound(job_id)
        if outcome == "busy":
            raise JobBusy(f"cron job {job_id!r} already has a run in progress")
        self.scheduler.launch(spec, run_id)
        return run_id

    async def state(self, job_id: str) -> JobState:
        record = await self._record(job_id)
        history = await self._repo.history(job_id, limit=1)
        last = history[0] if history else None
        return JobState(
            next_run_at=from_epoch(record.next_run_at) if record.enabled else None,
            last_run_at=from_epoch(last.started_at) if last else None,
            last_status=last.status if last else None,
            last_error=last.error if last else None,
        )

    async def history(self, job_id: str, limit: int = 100) -> list[CronRunRecord]:
        await self._record(job_id)
        return await self._repo.history(job_id, limit)

    async def _record(self, job_id: str) -> CronJobRecord:
        record = await self._repo.get(job_id)
        if record is None:
            raise JobNotFound(job_id)
        return record

    async def _save(
        self, record: CronJobRecord, spec: JobSpec, since: datetime, next_run: datetime | None
    ) -> None:
        saved = await self._repo.update(
            record.id,
            self.scheduler.clock().timestamp(),
            spec=_dump(spec),
            enabled=spec.enabled,
            schedule_since=since.timestamp(),
            next_run_at=to_epoch(next_run),
        )
        if not saved:
            raise JobNotFound(record.id)
        self.scheduler.wake()


def _dump(spec: JobSpec) -> dict[str, object]:
    return spec.model_dump(mode="json")
