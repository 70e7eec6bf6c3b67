"""A task taken up again after a restart whose task another node ended meanwhile (this
node was frozen while its adopted call ran, and declared lost): the adopted call's
result is not stored in the session, as no write of a turn whose task has ended is
(``ChatRepository.append_to_turn``). It was appended with the plain ``append``, in
between the messages of the turn another node had taken the session for."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from tether.store.records import TaskRecord, ToolCallRecord
from tether.tasks.service import TaskService

ASKED = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "m1", "type": "function", "function": {"name": "x", "arguments": "{}"}}],
}
TASK = TaskRecord("t1", "s", "u", "running", "user", None, None, 1.0, 1.0, None)
CALL = ToolCallRecord(
    "m1", "s", "t1", "default", "x", {}, "running", None, None, False, None,
    None, None, 1.0, None,
)  # fmt: skip


class Tasks:
    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    async def unfinished(self, owners: Any) -> list[TaskRecord]:
        return [TASK]

    async def count_resume(self, task_id: str) -> None:
        return None

    async def mark_running(self, task_id: str) -> None:
        return None

    async def finish(self, task_id: str, result: dict[str, Any]) -> None:
        self.results.append(result)

    async def get(self, task_id: str) -> TaskRecord:
        return replace(TASK, status="finished", result=self.results[-1])

    async def fail_unfinished(self, *args: Any, **kwargs: Any) -> list[TaskRecord]:
        return []


class Chats:
    """The session's messages; the task was failed by a survivor meanwhile."""

    def __init__(self) -> None:
        self.stored: list[Any] = []

    async def task_messages(self, task_id: str) -> list[Any]:
        return [
            SimpleNamespace(payload={"role": "user", "content": "go"}),
            SimpleNamespace(payload=ASKED),
        ]

    async def append(self, session_id: str, task_id: str | None, entries: Any) -> None:
        self.stored.extend(entries)

    async def append_to_turn(self, session_id: str, task_id: str, entries: Any) -> bool:
        return False  # the task has ended: nothing written

    async def get_session(self, session_id: str) -> None:
        return None


class Deliveries:
    async def sessions_with_pending(self) -> list[str]:
        return []

    async def pending(self, session_id: str) -> list[Any]:
        return []


class UncalledAgent:
    def __init__(self) -> None:
        self.turns = 0

    async def run_turn(self, req: Any, events: Any) -> Any:
        self.turns += 1
        raise AssertionError("the model is not asked again for an ended task")


async def test_a_resumed_task_ended_elsewhere_stores_no_call_result() -> None:
    tasks, chats, agent = Tasks(), Chats(), UncalledAgent()
    tool_calls = SimpleNamespace(list_for_task=lambda task_id: _calls())
    store: Any = SimpleNamespace(
        tasks=tasks, chats=chats, deliveries=Deliveries(), tool_calls=tool_calls, owner=None
    )
    service = TaskService(store, agent, SimpleNamespace(), "off", 4)  # type: ignore[arg-type]
    adopted: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    adopted.set_result(SimpleNamespace(model_text="exit code 0", lost=None))
    adoption: Any = SimpleNamespace(lost_problem=lambda task_id: None, waiting={"m1": adopted})
    await service.recover([None], adoption)
    result = await asyncio.wait_for(service.wait("t1"), 5)
    assert chats.stored == []
    assert agent.turns == 0
    assert result is not None and result["status"] == "failed"
    assert "another node" in result["error"]


async def _calls() -> list[ToolCallRecord]:
    return [CALL]


class FirstEndStands(Tasks):
    """The store as it is: the survivor's end stands, a later one is not recorded."""

    async def finish(self, task_id: str, result: dict[str, Any]) -> bool:
        self.results.append(result)
        return False


async def test_a_task_ended_elsewhere_is_not_announced_finished_again() -> None:
    # The survivor that failed the task told the webhooks so; this node's own end of it,
    # which the store does not take, is not a second task.finished.
    tasks, chats = FirstEndStands(), Chats()
    tool_calls = SimpleNamespace(list_for_task=lambda task_id: _calls())
    store: Any = SimpleNamespace(
        tasks=tasks, chats=chats, deliveries=Deliveries(), tool_calls=tool_calls, owner=None
    )
    told: list[tuple[str, dict[str, Any]]] = []
    service = TaskService(
        store,
        UncalledAgent(),  # type: ignore[arg-type]
        SimpleNamespace(),  # type: ignore[arg-type]
        "off",
        4,
        notify=lambda kind, event: told.append((kind, event)),
    )
    adopted: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    adopted.set_result(SimpleNamespace(model_text="exit code 0", lost=None))
    adoption: Any = SimpleNamespace(lost_problem=lambda task_id: None, waiting={"m1": adopted})
    await service.recover([None], adoption)
    await asyncio.wait_for(service.wait("t1"), 5)
    assert len(tasks.results) == 1
    assert told == []
