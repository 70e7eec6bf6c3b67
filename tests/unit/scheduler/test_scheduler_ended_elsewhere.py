"""A run a survivor ended ("node lost") while its node was frozen: the node back from
the freeze does not announce the run's end a second time, with another outcome."""

from __future__ import annotations

from typing import Any

from cron_parts import CronNode, FakeTasks

from tether.node_loss import NODE_LOST

JOB = {
    "id": "frozen",
    "name": "frozen",
    "schedule": {"type": "cron", "cron": "0 * * * *"},
    "task_type": "agent",
    "request": {"input": "check"},
}


async def test_a_run_another_node_ended_first_is_not_announced_failed_again(
    open_cron: Any,
) -> None:
    tasks = FakeTasks(instant=False)
    node: CronNode = await open_cron(tasks)
    await node.jobs.create(JOB)
    run_id = await node.jobs.run_now("frozen")
    task_id = await tasks.wait_submitted()
    # The survivor's end, stored (and announced by it) while this node was frozen.
    await node.store.cron.finish_run(run_id, "error", NODE_LOST, 1.0)
    tasks.finish(task_id, {"status": "failed", "error": "ended by another node"})
    await node.scheduler.idle()

    (run,) = await node.jobs.history("frozen")
    assert (run.status, run.error) == ("error", NODE_LOST)
    assert node.notified == []


async def test_a_failed_run_whose_end_is_its_own_is_announced(open_cron: Any) -> None:
    tasks = FakeTasks(instant=False)
    node: CronNode = await open_cron(tasks)
    await node.jobs.create(JOB)
    run_id = await node.jobs.run_now("frozen")
    tasks.finish(await tasks.wait_submitted(), {"status": "failed", "error": "it broke"})
    await node.scheduler.idle()

    event = {"job_id": "frozen", "run_id": run_id, "status": "error", "error": "it broke"}
    assert node.notified == [("cron.run_failed", event)]
    # Once ended, a later end (another node's, late) is not the run's.
    assert await node.store.cron.finish_run(run_id, "error", NODE_LOST, 2.0) is False
