"""/api/cron: cron jobs in QwenPaw's shape, their state and run history."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, Field

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.scheduler.clock import from_epoch
from tether.scheduler.job_parts import KNOWN_CHANNELS
from tether.scheduler.models import JobSpec
from tether.store.records import CronRunRecord

router = APIRouter(prefix="/api/cron", tags=["cron"], route_class=ValidTextRoute)

# The body is validated by the service (a ``once`` time must not be in the past, which
# needs the scheduler's clock), so the route takes it as JSON and documents the shape.
JobBody = Annotated[
    dict[str, Any],
    Body(description="A cron job: QwenPaw's CronJobSpec, plus Tether's approval_level."),
]


class JobStateOut(BaseModel):
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None


class JobView(BaseModel):
    spec: JobSpec
    state: JobStateOut


class RunOut(BaseModel):
    run_at: datetime = Field(description="When the run started.")
    status: Literal["running", "success", "error", "skipped", "cancelled"]
    error: str | None
    trigger: Literal["scheduled", "manual"]
    run_id: str
    outcome: str = Field(description="Tether: the run's own status (adds timeout).")
    scheduled_for: datetime | None
    started_at: datetime
    finished_at: datetime | None
    task_id: str | None


class RunStarted(BaseModel):
    started: bool
    job_id: str
    run_id: str


class DispatchTargetItem(BaseModel):
    channel: str
    user_id: str
    session_id: str


class DispatchTargets(BaseModel):
    channels: list[str]
    items: list[DispatchTargetItem]


def _run_out(run: CronRunRecord) -> RunOut:
    started = from_epoch(run.started_at)
    assert started is not None
    return RunOut(
        run_at=started,
        # QwenPaw has no timeout status; its clients see an error that says so.
        status="error" if run.status == "timeout" else run.status,
        error=run.error,
        trigger=run.trigger,
        run_id=run.id,
        outcome=run.status,
        scheduled_for=from_epoch(run.scheduled_for),
        started_at=started,
        finished_at=from_epoch(run.finished_at),
        task_id=run.task_id,
    )


async def _state(job_id: str, services: ServicesDep) -> JobStateOut:
    return JobStateOut(**vars(await services.cron.state(job_id)))


@router.get("/dispatch-targets", response_model=DispatchTargets)
async def dispatch_targets(
    services: ServicesDep,
    channel: Annotated[str | None, Query(max_length=64)] = None,
    keyword: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=2000)] = 500,
) -> DispatchTargets:
    """Sessions a job could deliver to, from the known chats."""
    needle = (keyword or "").strip().lower()
    items = [
        DispatchTargetItem(channel=s.channel, user_id=s.user_id, session_id=s.id)
        for s in (v.session for v in await services.chats.all(channel=channel))
        if needle in f"{s.channel} {s.user_id} {s.id}".lower()
    ][:limit]
    channels = sorted({*KNOWN_CHANNELS, *(i.channel for i in items)})
    return DispatchTargets(channels=channels, items=items)


@router.get("/jobs", response_model=list[JobSpec])
async def list_jobs(services: ServicesDep) -> list[JobSpec]:
    return await services.cron.list_jobs()


@router.post("/jobs", response_model=JobSpec)
async def create_job(services: ServicesDep, body: JobBody) -> JobSpec:
    """Create a job; 409 if its id is taken, 422 naming the field for bad input."""
    return await services.cron.create(body)


@router.get("/jobs/{job_id}", response_model=JobView)
async def get_job(job_id: str, services: ServicesDep) -> JobView:
    """The job's spec and its state."""
    spec = await services.cron.get(job_id)
    return JobView(spec=spec, state=await _state(job_id, services))


@router.put("/jobs/{job_id}", response_model=JobSpec)
async def replace_job(job_id: str, services: ServicesDep, body: JobBody) -> JobSpec:
    """Replace a job's definition (its history stays)."""
    return await services.cron.replace(job_id, body)


@router.delete("/jobs/{job_id}")
async def delete_job(job_id: str, services: ServicesDep) -> dict[str, Any]:
    """Delete a job and its history; a run in progress is stopped."""
    await services.cron.delete(job_id)
    return {"deleted": True}


@router.post("/jobs/{job_id}/pause")
async def pause_job(job_id: str, services: ServicesDep) -> dict[str, Any]:
    await services.cron.set_enabled(job_id, False)
    return {"paused": True}


@router.post("/jobs/{job_id}/resume")
async def resume_job(job_id: str, services: ServicesDep) -> dict[str, Any]:
    """Resume a paused job; ticks missed while paused are not run."""
    await services.cron.set_enabled(job_id, True)
    return {"resumed": True}


@router.post("/jobs/{job_id}/run", response_model=RunStarted)
async def run_job(job_id: str, services: ServicesDep) -> RunStarted:
    """Run the job now (409 while a run is in progress)."""
    run_id = await services.cron.run_now(job_id)
    return RunStarted(started=True, job_id=job_id, run_id=run_id)


@router.get("/jobs/{job_id}/state", response_model=JobStateOut)
async def job_state(job_id: str, services: ServicesDep) -> JobStateOut:
    return await _state(job_id, services)


@router.get("/jobs/{job_id}/history", response_model=list[RunOut])
async def job_history(
    job_id: str, services: ServicesDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[RunOut]:
    """The job's runs, newest first."""
    return [_run_out(r) for r in await services.cron.history(job_id, limit)]
