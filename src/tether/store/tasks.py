"""Chat task rows."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from tether.store.batches import batches
from tether.store.chats import ensure_session_in, insert_messages
from tether.store.database import Database
from tether.store.owners import owned_by
from tether.store.records import TaskRecord
from tether.store.rows import to_record
from tether.store.tables import tasks

# Built once (a turn runs each of them); the SET columns are the parameters' keys.
_INSERT_TASK = tasks.insert()
_UPDATE_TASK = sa.update(tasks).where(tasks.c.id == sa.bindparam("b_id"))
# Neither a start nor an end changes a task that has ended: the first end stands.
_UNFINISHED_TASK = _UPDATE_TASK.where(tasks.c.status != "finished")


class TaskRepository:
    def __init__(self, db: Database, owner: str | None = None) -> None:
        self._db = db
        self._owner = owner

    async def open_in_session(
        self,
        task_id: str,
        session: tuple[str, str, str, str | None],
        trigger: str,
        level: str | None,
        entries: Sequence[tuple[str, dict[str, Any]]],
        when_unattended: str | None = None,
    ) -> None:
        """Start a task in one transaction: create its session (id, user, channel, title)
        or touch it, record the task pending, and persist its first messages as (kind,
        payload) pairs."""
        session_id, user_id, channel, title = session
        now = time.time()
        row = self._row(task_id, session_id, user_id, trigger, level, now)
        async with self._db.write() as conn:
            await ensure_session_in(conn, self._db, session_id, user_id, channel, title, now)
            await conn.execute(_INSERT_TASK, row | {"when_unattended": when_unattended})
            if entries:
                await insert_messages(conn, session_id, task_id, entries, now)

    def _row(
        self,
        task_id: str,
        session_id: str,
        user_id: str,
        trigger: str,
        level: str | None,
        now: float,
    ) -> dict[str, Any]:
        return {
            "id": task_id,
            "session_id": session_id,
            "user_id": user_id,
            "status": "pending",
            "trigger": trigger,
            "approval_level": level,
            "result": None,
            "created_at": now,
            "owner": self._owner,
        }

    async def mark_running(self, task_id: str) -> None:
        """Record the task's turn started, unless the task has ended: a survivor may have
        failed it as "node lost" while it waited here (this node frozen or cut off), and
        a task made running again would take the turn's writes and its end."""
        async with self._db.write() as conn:
            await conn.execute(
                _UNFINISHED_TASK,
                {"b_id": task_id, "status": "running", "started_at": time.time()},
            )

    async def finish(self, task_id: str, result: dict[str, Any]) -> bool:
        """Record the task's result, unless it has one: the first end stands (a survivor
        may have failed it as "node lost" while its node was cut off). False if another
        end stands; True also for a task that is gone (its chat deleted meanwhile), whose
        end is still this one."""
        async with self._db.write() as conn:
            values = {"status": "finished", "result": result, "finished_at": time.time()}
            done = await conn.execute(_UNFINISHED_TASK, {"b_id": task_id, **values})
            if done.rowcount:
                return True
            gone = sa.select(tasks.c.id).where(tasks.c.id == task_id)
            return await conn.scalar(gone) is None

    async def finished_among(self, task_ids: Collection[str]) -> set[str]:
        """Which of ``task_ids`` the store shows as finished."""
        finished: set[str] = set()
        async with self._db.read() as conn:
            for batch in batches(task_ids):
                rows = await conn.execute(
                    sa.select(tasks.c.id).where(tasks.c.id.in_(batch), tasks.c.status == "finished")
                )
                finished.update(r.id for r in rows)
        return finished

    async def get(self, task_id: str) -> TaskRecord | None:
        async with self._db.read() as conn:
            row = (await conn.execute(sa.select(tasks).where(tasks.c.id == task_id))).first()
            return to_record(TaskRecord, row) if row else None

    async def list_for_session(self, session_id: str) -> list[TaskRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tasks)
                .where(tasks.c.session_id == session_id)
                .order_by(tasks.c.created_at)
            )
            return [to_record(TaskRecord, r) for r in rows]

    async def unfinished_sessions(self) -> set[str]:
        """Sessions with a task pending or running, on any server."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tasks.c.session_id).where(tasks.c.status != "finished").distinct()
            )
            return {r.session_id for r in rows}

    async def unfinished_owners(self) -> set[str | None]:
        """The owners (servers) of tasks not yet finished."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tasks.c.owner).where(tasks.c.status != "finished").distinct()
            )
            return {r.owner for r in rows}

    async def fail_unfinished(
        self, reason: str, owners: Collection[str | None], keep: Collection[str] = ()
    ) -> list[TaskRecord]:
        """Mark the tasks ``owners`` (servers that are gone) left unfinished as failed,
        but those in ``keep`` (taken up again); returns them as they are now."""
        now = time.time()
        result = {"status": "failed", "error": reason}
        unfinished = sa.and_(
            tasks.c.status != "finished",
            owned_by(tasks.c.owner, owners),
            tasks.c.id.not_in(list(keep)),
        )
        async with self._db.write() as conn:
            rows = await conn.execute(sa.select(tasks).where(unfinished))
            found = [to_record(TaskRecord, r) for r in rows]
            if not found:
                return []
            # Those rows only, each if still unfinished (another node may finish one).
            done = await conn.execute(
                sa.update(tasks)
                .where(unfinished, tasks.c.id.in_([t.id for t in found]))
                .values(status="finished", finished_at=now, result=result)
                .returning(tasks.c.id)
            )
            failed = {row.id for row in done}
        return [
            replace(t, status="finished", finished_at=now, result=result)
            for t in found
            if t.id in failed
        ]

    async def unfinished(self, owners: Collection[str | None]) -> list[TaskRecord]:
        """Tasks ``owners`` (servers that are gone) left pending or running, oldest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tasks)
                .where(tasks.c.status != "finished", owned_by(tasks.c.owner, owners))
                .order_by(tasks.c.created_at)
            )
            return [to_record(TaskRecord, r) for r in rows]

    async def count_resume(self, task_id: str) -> None:
        """Record that the task is being taken up again after a restart, by this server
        (its owner from now on, so no later server takes it for a dead one's)."""
        async with self._db.write() as conn:
            await conn.execute(
                sa.update(tasks)
                .where(tasks.c.id == task_id)
                .values(resumes=tasks.c.resumes + 1, owner=self._owner)
            )
