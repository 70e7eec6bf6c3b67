"""A cron run's end that the store refuses for a while (a full disk): stored once the
store takes it, the job busy until then and free after; a stop or an exit does not
wait for the store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cron_parts import CronNode, FakeClock, FakeTasks

from tether.errors import OutOfStorage
from tether.scheduler.jobs import JobBusy
from tether.store import until_stored

JOB = {
    "id": "full",
    "name": "full",
    "schedule": {"type": "cron", "cron": "0 * * * *"},
    "task_type": "agent",
    "request": {"input": "check"},
}


class RefusingEnds:
    """``finish_run`` that the store refuses while ``full``; ``refused`` is set at each
    refusal."""

    def __init__(self, node: CronNode, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = True
        self.refused = asyncio.Event()
        self._finish_run = node.store.cron.finish_run
        monkeypatch.setattr(node.store.cron, "finish_run", self)
        monkeypatch.setattr(until_stored, "FIRST_WAIT", 0.01)

    async def __call__(self, *args: Any) -> bool:
        if self.full:
            self.refused.set()
            raise OutOfStorage("the database cannot be written (database or disk is full)")
        return await self._finish_run(*args)


async def test_a_run_end_refused_by_the_store_is_stored_once_it_has_room(
    node: CronNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end was written once: refused, the run read ``running`` and its job busy
    until the next start, though the disk had room again."""
    ends = RefusingEnds(node, monkeypatch)
    await node.jobs.create(JOB)
    first = await node.jobs.run_now("full")
    await ends.refused.wait()
    with pytest.raises(JobBusy):
        await node.jobs.run_now("full")

    ends.full = False
    await node.scheduler.idle()
    (run,) = await node.jobs.history("full")
    assert (run.id, run.status, run.error) == (first, "success", None)
    second = await node.jobs.run_now("full")
    await node.scheduler.idle()
    # The clock stood still: the two runs began at the same instant.
    runs = {(r.id, r.status) for r in await node.jobs.history("full")}
    assert runs == {(first, "success"), (second, "success")}


async def test_a_run_stopped_while_the_store_refuses_its_end_does_not_wait_for_it(
    clock: FakeClock, open_cron: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's deletion and the exit return; the next start ends the run."""
    tasks = FakeTasks(instant=False)
    node: CronNode = await open_cron(tasks)
    ends = RefusingEnds(node, monkeypatch)
    await node.jobs.create(JOB)
    await node.jobs.run_now("full")
    await tasks.wait_submitted()
    await node.scheduler.cancel_runs("full")
    assert ends.refused.is_set() and tasks.stopped == ["task-0"]
    await node.scheduler.shutdown()

    restarted: CronNode = await open_cron()
    (run,) = await restarted.jobs.history("full")
    assert (run.status, run.error) == ("error", "server restarted during the run")
