"""`tether cron ...`: manage cron jobs through a running server's HTTP API."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click

from tether.cli.server_api import ServerApi, ServerGroup, server_options, table


@click.group(cls=ServerGroup)
@server_options
@click.pass_context
def cron(ctx: click.Context, url: str, token: str | None, as_json: bool) -> None:
    """Manage cron jobs on a running server."""
    ctx.obj = ServerApi.connect(url, token, as_json)


def _describe_schedule(schedule: dict[str, Any]) -> str:
    if schedule["type"] == "cron":
        return f"{schedule['cron']} ({schedule['timezone']})"
    return f"once at {schedule['run_at']}"


@cron.command("list")
@click.pass_obj
def list_jobs(api: ServerApi) -> None:
    """List the jobs with their next run and last status."""
    jobs = api.call("GET", "/api/cron/jobs")
    for job in jobs:
        job["state"] = api.call("GET", f"/api/cron/jobs/{job['id']}/state")
    rows = [["ID", "NAME", "ENABLED", "SCHEDULE", "NEXT RUN", "LAST STATUS"]]
    rows += [
        [
            job["id"],
            job["name"],
            "yes" if job["enabled"] else "no",
            _describe_schedule(job["schedule"]),
            job["state"]["next_run_at"] or "-",
            job["state"]["last_status"] or "-",
        ]
        for job in jobs
    ]
    api.show(jobs, table(rows) if jobs else "no cron jobs")


def _once_time(at: str, tz: str | None) -> str:
    """``--at`` as ISO-8601 with an offset; a time without one is read in ``--tz``
    (default: this machine's local zone)."""
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        raise click.BadParameter(f"{at!r} is not an ISO-8601 time", param_hint="--at") from None
    if when.utcoffset() is not None and tz:
        raise click.UsageError(
            f"--at {at!r} has its own UTC offset, so --tz {tz!r} would not apply: give one"
        )
    if when.utcoffset() is None:
        try:
            when = when.replace(tzinfo=ZoneInfo(tz)) if tz else when.astimezone()
        except (ZoneInfoNotFoundError, ValueError):
            raise click.BadParameter(f"unknown time zone {tz!r}", param_hint="--tz") from None
    return when.isoformat()


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _task(prompt: str | None, text: str | None) -> dict[str, Any]:
    """The job's task fields in QwenPaw's shape."""
    if prompt is not None:
        message = {"role": "user", "content": [{"type": "text", "text": prompt}]}
        return {"task_type": "agent", "request": {"input": [message]}}
    return {"task_type": "text", "text": text}


@cron.command("add")
@click.option("--name", required=True)
@click.option("--cron", "cron_expr", help="5-field cron expression.")
@click.option("--at", help="Run once at this ISO-8601 time.")
@click.option(
    "--tz",
    help="Time zone of --cron (default UTC), or of an --at without offset (default: "
    "this machine's local zone).",
)
@click.option("--prompt", help="Run the agent with this prompt.")
@click.option("--text", help="Post this text to the job's session.")
@click.option("--id", "job_id", help="Job id (default: generated).")
@click.option("--session", "session_id", help="Session to deliver to (default cron:<id>).")
@click.option("--user", "user_id", default="cron", show_default=True, help="User of --session.")
@click.option("--approval-level", type=click.Choice(["off", "auto", "smart", "strict"]))
@click.option(
    "--when-unattended",
    type=click.Choice(["deny", "wait"]),
    help="A call that needs approval: refused at once, or waits for a person (default: "
    "the session's setting, else TETHER_WHEN_UNATTENDED, else refused).",
)
@click.option("--timeout", type=click.IntRange(min=1), help="Seconds a run may take (default 120).")
@click.option("--grace", type=click.IntRange(min=0), help="Misfire grace in seconds (default 600).")
@click.option("--paused", is_flag=True, help="Create the job paused.")
@click.pass_obj
def add(api: ServerApi, /, **opts: Any) -> None:
    """Create a job: --cron or --at, and --prompt or --text."""
    if (opts["cron_expr"] is None) == (opts["at"] is None):
        raise click.UsageError("give exactly one of --cron and --at")
    if (opts["prompt"] is None) == (opts["text"] is None):
        raise click.UsageError("give exactly one of --prompt and --text")
    schedule: dict[str, Any] = (
        {"type": "cron", "cron": opts["cron_expr"], "timezone": opts["tz"] or "UTC"}
        if opts["cron_expr"] is not None
        else {"type": "once", "run_at": _once_time(opts["at"], opts["tz"])}
    )
    body = {
        "name": opts["name"],
        "enabled": not opts["paused"],
        "schedule": schedule,
        **_task(opts["prompt"], opts["text"]),
        **_present(
            {
                "id": opts["job_id"],
                "approval_level": opts["approval_level"],
                "when_unattended": opts["when_unattended"],
            }
        ),
        "runtime": _present(
            {"timeout_seconds": opts["timeout"], "misfire_grace_seconds": opts["grace"]}
        ),
    }
    if opts["session_id"] is not None:
        target = {"user_id": opts["user_id"], "session_id": opts["session_id"]}
        body["dispatch"] = {"type": "channel", "channel": "console", "target": target}
    job = api.call("POST", "/api/cron/jobs", body)
    api.show(job, f"created {job['id']}: {_describe_schedule(job['schedule'])}")


@cron.command("run")
@click.argument("job_id")
@click.pass_obj
def run(api: ServerApi, job_id: str) -> None:
    """Run a job now; prints the run id."""
    started = api.call("POST", f"/api/cron/jobs/{job_id}/run")
    api.show(started, started["run_id"])


@cron.command("pause")
@click.argument("job_id")
@click.pass_obj
def pause(api: ServerApi, job_id: str) -> None:
    """Stop a job from firing until it is resumed."""
    api.show(api.call("POST", f"/api/cron/jobs/{job_id}/pause"), f"paused {job_id}")


@cron.command("resume")
@click.argument("job_id")
@click.pass_obj
def resume(api: ServerApi, job_id: str) -> None:
    """Let a paused job fire again (ticks missed while paused are not run)."""
    api.show(api.call("POST", f"/api/cron/jobs/{job_id}/resume"), f"resumed {job_id}")


@cron.command("rm")
@click.argument("job_id")
@click.pass_obj
def remove(api: ServerApi, job_id: str) -> None:
    """Delete a job and its history."""
    api.show(api.call("DELETE", f"/api/cron/jobs/{job_id}"), f"deleted {job_id}")
