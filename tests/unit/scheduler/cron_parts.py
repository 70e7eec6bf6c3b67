"""In-process cron parts: a clock the test moves, a fake task service, a node per process."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tether.model_texts import TASK_STOPPED
from tether.scheduler.jobs import CronJobs
from tether.scheduler.runner import RunExecutor
from tether.scheduler.service import CronScheduler
from tether.store.database import Database
from tether.store.store import Store


class FakeClock:
    """A clock that only moves when the test says so."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def set(self, value: datetime) -> datetime:
        self.now = value
        return value

    def advance(self, seconds: float) -> datetime:
        return self.set(self.now + timedelta(seconds=seconds))


@dataclass
class FakeTasks:
    """Chat tasks that end when the test says so (or at once, if ``instant``)."""

    instant: bool = True
    submitted: list[tuple[str, str | None]] = field(default_factory=list)
    # The when_unattended each submission asked for.
    policies: list[str | None] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    _ends: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _submitted_event: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_submitted(self) -> str:
        """Wait until a task has been submitted; returns the latest task id."""
        await asyncio.wait_for(self._submitted_event.wait(), 5)
        return f"task-{len(self.submitted) - 1}"

    async def submit(
        self,
        session_id: str,
        user_id: str,
        channel: str,
        texts: Sequence[str],
        level: str | None,
        trigger: str = "user",
        *,
        attended: bool = False,
        when_unattended: str | None = None,
    ) -> str:
        task_id = f"task-{next(self._ids)}"
        self.policies.append(when_unattended)
        self.submitted.append((session_id, level))
        self._ends[task_id] = asyncio.get_running_loop().create_future()
        self._submitted_event.set()
        if self.instant:
            self.finish(task_id, {"status": "completed", "text": "ok"})
        return task_id

    def resume(self, task_id: str) -> str:
        """Know ``task_id`` as a turn taken up again after a restart (not yet ended)."""
        self._ends[task_id] = asyncio.get_running_loop().create_future()
        return task_id

    def finish(self, task_id: str, result: dict[str, Any]) -> None:
        if not self._ends[task_id].done():
            self._ends[task_id].set_result(result)

    async def wait(self, task_id: str) -> dict[str, Any] | None:
        return await asyncio.shield(self._ends[task_id])

    async def stop(self, task_id: str, reason: str = TASK_STOPPED) -> bool | None:
        self.stopped.append(task_id)
        self.finish(task_id, {"status": "cancelled", "error": reason})
        return True


@dataclass
class CronNode:
    """One process's view: its own Database over the shared file, and its scheduler."""

    db: Database
    store: Store
    scheduler: CronScheduler
    jobs: CronJobs
    tasks: FakeTasks
    #: The webhook events its runs notified, in order.
    notified: list[tuple[str, dict[str, Any]]]


async def open_node(
    url: str, clock: FakeClock, tasks: FakeTasks | None = None, resumed: Collection[str] = ()
) -> CronNode:
    """A node over the database at ``url``, recovered as a server is at its start:
    every run left in progress is another's that is gone, and the turns ``resumed``
    were taken up again here."""
    db = Database(url)
    await db.migrate()
    store = Store(db)
    tasks = tasks or FakeTasks()
    notified: list[tuple[str, dict[str, Any]]] = []
    executor = RunExecutor(
        store.cron,
        store.chats,
        store.tool_calls,
        tasks,
        clock,
        notify=lambda event, data: notified.append((event, data)),
    )
    scheduler = CronScheduler(store.cron, executor, clock)
    await scheduler.recover(await store.cron.running_owners(), resumed)
    return CronNode(db, store, scheduler, CronJobs(store.cron, scheduler), tasks, notified)


async def close_node(node: CronNode) -> None:
    await node.scheduler.shutdown()
    await node.db.close()
