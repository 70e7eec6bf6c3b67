"""A task while it runs on this node, and the errors and views of tasks."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from tether.agent.ports import WhenUnattended
from tether.errors import Busy, NotFound
from tether.store.records import TaskRecord
from tether.tasks.events import EventFeed


class TooManyTasks(Busy):
    """The server is already running its maximum number of tasks."""


class TaskNotFound(NotFound):
    """No task has this id."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"Task not found: {task_id}")


@dataclass
class Running:
    task_id: str
    session_id: str
    trigger: str = "user"
    attended: bool = False
    when_unattended: WhenUnattended | None = None
    feed: EventFeed = field(default_factory=EventFeed)
    job: asyncio.Task[None] | None = None
    stop_reason: str | None = None
    #: Set once the turn is over and its result known: storing it may take longer (a
    #: full disk), and a stop or an exit waits for the turn, not for the disk.
    turn_over: asyncio.Event = field(default_factory=asyncio.Event)

    async def until_turn_over(self) -> None:
        """Wait until the turn is over, or the job has ended without one."""
        if self.job is None:
            return
        over = asyncio.ensure_future(self.turn_over.wait())
        try:
            await asyncio.wait({self.job, over}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            over.cancel()


def new_task_id() -> str:
    """A task id in QwenPaw's form: ``task-`` and 12 hex digits."""
    return f"task-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class TaskView:
    record: TaskRecord
    messages: list[dict[str, Any]]
