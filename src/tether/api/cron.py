"""/api/cron: cron jobs, their state and run history."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Any, Literal, TypeVar

from fastapi import APIRouter, Body, HTTPException, Query
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.scheduler.clock import from_epoch
from tether.scheduler.jobs import JobBusy, JobExists, JobFieldError, JobNotFound
from tether.scheduler.models import JobSpec
from tether.store.records import CronRunRecord

router = APIRouter(prefix="/api/cron", tags=["cron"], route_class=ValidTextRoute)

T = TypeVar("T")
JobBody = Body(..., description="A cron job: id?, name, enabled?, schedule, task, ...")


class JobStateOut(BaseModel):
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None


class RunOut(BaseModel):
    run_id: str
    trigger: Literal["scheduled", "manual"]
    status: Literal["running", "success", "error", "timeout", "skipped"]
    scheduled_for: datetime | None
    started_at: datetime
    finished_at: datetime | None
    task_id: str | None
    error: str | None


class RunStarted(BaseModel):
    job_id: str
    run_id: str


def _run_out(run: CronRunRecord) -> RunOut:
    return RunOut(
        run_id=run.id,
        trigger=run.trigger,
        status=run.status,
        scheduled_for=from_epoch(run.scheduled_for),
        started_at=from_epoch(run.started_at),
        finished_at=from_epoch(run.finished_at),
        task_id=run.task_id,
        error=run.error,
    )


async def _call(operation: Awaitable[T]) -> T:
    """Translate the service's errors into HTTP answers."""
    try:
        return await operation
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in errors]) from None
    except JobFieldError as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("body", exc.field), "msg": str(exc)}]
        ) from None
    except JobNotFound as exc:
        raise HTTPException(404, f"cron job {exc.args[0]!r} not found") from None
    except (JobExists, JobBusy) as exc:
        raise HTTPException(409, str(exc)) from None


@router.get("/jobs", response_model=list[JobSpec])
async def list_jobs(services: ServicesDep) -> list[JobSpec]:
    return await services.cron.list_jobs()


@router.post("/jobs", response_model=JobSpec)
async def create_job(services: ServicesDep, body: dict[str, Any] = JobBody) -> JobSpec:
    """Create a job; 409 if its id is taken, 422 naming the field for bad input."""
    return await _call(services.cron.create(body))


@router.get("/jobs/{job_id}", response_model=JobSpec)
async def get_job(job_id: str, services: ServicesDep) -> JobSpec:
    return await _call(services.cron.get(job_id))


@router.put("/jobs/{job_id}", response_model=JobSpec)
async def replace_job(
    job_id: str, services: ServicesDep, body: dict[str, Any] = JobBody
) -> JobSpec:
    """Replace a job's definition (its history stays)."""
    return await _call(services.cron.replace(job_id, body))


@router.delete("/jobs/{job_id}")
async def delete_job(job_id: str, services: ServicesDep) -> dict[str, Any]:
    """Delete a job and its history; a run in progress is stopped."""
    await _call(services.cron.delete(job_id))
    return {"id": job_id, "deleted": True}


@router.post("/jobs/{job_id}/pause", response_model=JobSpec)
async def pause_job(job_id: str, services: ServicesDep) -> JobSpec:
    return await _call(services.cron.set_enabled(job_id, False))


@router.post("/jobs/{job_id}/resume", response_model=JobSpec)
async def resume_job(job_id: str, services: ServicesDep) -> JobSpec:
    """Resume a paused job; ticks missed while paused are not run."""
    return await _call(services.cron.set_enabled(job_id, True))


@router.post("/jobs/{job_id}/run", response_model=RunStarted)
async def run_job(job_id: str, services: ServicesDep) -> RunStarted:
    """Run the job now (409 while a run is in progress)."""
    run_id = await _call(services.cron.run_now(job_id))
    return RunStarted(job_id=job_id, run_id=run_id)


@router.get("/jobs/{job_id}/state", response_model=JobStateOut)
async def job_state(job_id: str, services: ServicesDep) -> JobStateOut:
    state = await _call(services.cron.state(job_id))
    return JobStateOut(**vars(state))


@router.get("/jobs/{job_id}/history", response_model=list[RunOut])
async def job_history(
    job_id: str, services: ServicesDep, limit: int = Query(100, ge=1, le=1000)
) -> list[RunOut]:
    """The job's runs, newest first."""
    return [_run_out(r) for r in await _call(services.cron.history(job_id, limit))]
