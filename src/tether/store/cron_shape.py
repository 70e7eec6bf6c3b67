"""Migration 0004: cron jobs stored in Tether's first shape move to QwenPaw's.

The first shape had ``task`` ({type: agent, prompt} or {type: text, text}),
``session_id``, ``timeout_seconds`` and ``misfire_grace_seconds`` at the top. The
new one has ``task_type``/``text``/``request``, ``dispatch.target`` and ``runtime``.
Nothing the job did changes: same session, same prompt, same limits (rounded up to
whole seconds, which QwenPaw's runtime counts in).
"""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa

#: The user the first shape's runs spoke as.
_CRON_USER = "cron"


def new_shape(old: dict[str, Any]) -> dict[str, Any]:
    """A job in the first shape, as the current shape; a job already moved is kept."""
    if "task" not in old:
        return old
    task = old["task"]
    job_id = old.get("id") or ""
    session_id = old.get("session_id") or f"cron:{job_id}"
    target = {"user_id": _CRON_USER, "session_id": session_id}
    new: dict[str, Any] = {
        key: old[key]
        for key in ("id", "name", "enabled", "schedule", "approval_level", "when_unattended")
        if key in old
    }
    if task.get("type") == "text":
        new.update(task_type="text", text=task.get("text"), request=None)
    else:
        prompt = {
            "role": "user",
            "type": "message",
            "content": [{"type": "text", "text": task.get("prompt", "")}],
        }
        new.update(task_type="agent", text=None, request={"input": [prompt], **target})
    new["dispatch"] = {"type": "channel", "channel": "console", "target": target}
    runtime: dict[str, Any] = {}
    for key in ("timeout_seconds", "misfire_grace_seconds"):
        if isinstance(old.get(key), int | float):
            runtime[key] = max(1 if key == "timeout_seconds" else 0, math.ceil(old[key]))
    new["runtime"] = runtime
    new["meta"] = {}
    return new


def migrate_cron_job_shape(conn: sa.Connection) -> None:
    """Rewrite every stored job's spec in the current shape (its history stays)."""
    jobs = sa.table("cron_jobs", sa.column("id", sa.String), sa.column("spec", sa.JSON))
    if not sa.inspect(conn).has_table("cron_jobs"):
        return
    for job_id, spec in conn.execute(sa.select(jobs.c.id, jobs.c.spec)).all():
        moved = new_shape(dict(spec))
        if moved != spec:
            conn.execute(sa.update(jobs).where(jobs.c.id == job_id).values(spec=moved))
