"""Migration 0004: jobs stored in Tether's first shape load in QwenPaw's, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tether.scheduler.models import JobSpec
from tether.store import schema
from tether.store.cron_shape import new_shape
from tether.store.database import Database
from tether.store.store import Store

OLD_AGENT: dict[str, Any] = {
    "id": "nightly",
    "name": "nightly report",
    "enabled": False,
    "schedule": {"type": "cron", "cron": "30 2 * * *", "timezone": "Europe/Berlin"},
    "task": {"type": "agent", "prompt": "summarise the logs"},
    "session_id": "ops",
    "approval_level": "strict",
    "when_unattended": "wait",
    "timeout_seconds": 1.5,
    "misfire_grace_seconds": 0.0,
}
OLD_TEXT: dict[str, Any] = {
    **OLD_AGENT,
    "id": "ping",
    "task": {"type": "text", "text": "stand-up"},
    "session_id": "cron:ping",
    "timeout_seconds": 600.0,
    "misfire_grace_seconds": 300.0,
}


def test_an_agent_job_keeps_its_session_prompt_level_and_limits() -> None:
    spec = JobSpec.model_validate(new_shape(OLD_AGENT))
    assert (spec.id, spec.name, spec.enabled, spec.approval_level) == (
        "nightly",
        "nightly report",
        False,
        "strict",
    )
    assert spec.schedule.model_dump(mode="json") == OLD_AGENT["schedule"]
    assert spec.request is not None and spec.request.prompt() == "summarise the logs"
    assert spec.target.session_id == "ops" and spec.target.user_id == "cron"
    assert spec.when_unattended == "wait"
    # Whole seconds now, rounded up so no run gets less time than before.
    assert (spec.runtime.timeout_seconds, spec.runtime.misfire_grace_seconds) == (2, 0)


def test_a_text_job_keeps_its_text() -> None:
    spec = JobSpec.model_validate(new_shape(OLD_TEXT))
    assert (spec.task_type, spec.text, spec.request) == ("text", "stand-up", None)
    assert spec.target.session_id == "cron:ping"
    assert (spec.runtime.timeout_seconds, spec.runtime.misfire_grace_seconds) == (600, 300)


def test_a_job_already_in_the_new_shape_is_left_alone() -> None:
    moved = new_shape(OLD_AGENT)
    assert new_shape(moved) is moved


async def test_an_existing_database_upgrades_in_place(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'tether.db'}"
    db = Database(url)
    # A database as the previous release left it: old specs, the shape change not applied.
    async with db.write() as conn:
        await conn.run_sync(schema.upgrade, "0102_i10_owners")
        for old in (OLD_AGENT, OLD_TEXT):
            await conn.execute(
                sa.text(
                    "INSERT INTO cron_jobs (id, spec, enabled, revision, schedule_since,"
                    " created_at, updated_at) VALUES (:id, :spec, 0, 1, 0, 0, 0)"
                ),
                {"id": old["id"], "spec": json.dumps(old)},
            )
    await db.close()

    db = Database(url)
    await db.migrate()
    try:
        records = {r.id: r for r in await Store(db).cron.list_jobs()}
        assert set(records) == {"nightly", "ping"}
        agent = JobSpec.model_validate(records["nightly"].spec)
        assert agent.request is not None and agent.request.prompt() == "summarise the logs"
        assert JobSpec.model_validate(records["ping"].spec).text == "stand-up"
    finally:
        await db.close()
