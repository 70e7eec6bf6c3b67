"""A task stopped twice at once (two clients, a double click) is recorded as stopped:
the second stop cancelled the task again while it was recording the first stop, which
cut that write, and the task read "running" for good."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from tether.tasks.service import TaskService


class Tasks:
    """The task store: the end's write is held until the test lets it go."""

    def __init__(self) -> None:
        self.finishing = asyncio.Event()
        self.may_finish = asyncio.Event()
        self.finished: dict[str, Any] = {}

    async def open_in_session(self, *args: Any) -> None:
        return None

    async def mark_running(self, task_id: str) -> None:
        return None

    async def finish(self, task_id: str, result: dict[str, Any]) -> None:
        self.finishing.set()
        await self.may_finish.wait()
        self.finished[task_id] = result


class Deliveries:
    async def pending(self, session_id: str) -> list[Any]:
        return []


class Chats:
    async def get_session(self, session_id: str) -> None:
        return None


class HeldAgent:
    """A turn that runs until it is stopped."""

    def __init__(self) -> None:
        self.turning = asyncio.Event()

    async def run_turn(self, req: Any, events: Any) -> Any:
        self.turning.set()
        await asyncio.Event().wait()


class Coordinator:
    def __init__(self) -> None:
        self.stops: list[str] = []
        self.stopped_twice = asyncio.Event()

    async def stop_task(self, task_id: str, reason: str) -> None:
        self.stops.append(reason)
        if len(self.stops) == 2:
            self.stopped_twice.set()


async def test_a_second_stop_during_the_first_does_not_cut_its_record() -> None:
    tasks, agent = Tasks(), HeldAgent()
    store: Any = SimpleNamespace(tasks=tasks, deliveries=Deliveries(), chats=Chats(), owner=None)
    coordinator = Coordinator()
    service = TaskService(store, agent, coordinator, "off", 4)  # type: ignore[arg-type]
    task_id = await service.submit("s", "u", "console", ["go"], "off")
    await asyncio.wait_for(agent.turning.wait(), 5)
    first = asyncio.ensure_future(service.stop(task_id))
    await asyncio.wait_for(tasks.finishing.wait(), 5)  # recording the first stop
    second = asyncio.ensure_future(service.stop(task_id, "stopped again"))
    await asyncio.wait_for(coordinator.stopped_twice.wait(), 5)  # the second one is in
    tasks.may_finish.set()
    assert await asyncio.wait_for(first, 5) is True
    assert await asyncio.wait_for(second, 5) is True
    assert tasks.finished == {task_id: {"status": "cancelled", "error": "the task was stopped"}}
    assert service.running_count() == 0
    # The first reason stands, on the calls as on the task.
    assert coordinator.stops == ["the task was stopped"] * 2
