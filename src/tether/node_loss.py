"""A node lost: what the survivor that declared it dead ends, and what the node does if
it comes back.

A node that stops renewing its lease is declared dead by exactly one survivor
(cluster/lease.py), which ends what the lease's owner left unfinished, so that nothing
stays ``running`` anywhere: its tool calls end ``error`` ("node lost"), its tasks fail,
its cron runs are closed as errors and its pending approvals are denied and audited.
Its processes are reaped by their marker, which finds them if they run on the
survivor's machine; elsewhere they die with their server (parent-death signal) or at
the keeper's own deadline.

The node may not be dead at all (stopped, or cut off from the database). When it finds
its lease gone it stops the calls the store shows ended and the tasks that were failed
for it, before it joins again; what was not ended it keeps running.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Protocol

from tether import recovery
from tether.governance import approvals
from tether.governance.gate import GovernanceGate
from tether.scheduler.runner import run_failed_event
from tether.store.records import NodeRecord
from tether.store.store import Store
from tether.tasks.finished import record_finished_event
from tether.toolcalls.errors import ToolCallConflict, ToolCallNotFound
from tether.webhooks.events import Notify

log = logging.getLogger(__name__)

#: The end reason of a lost node's calls, and the error of its tasks and cron runs.
NODE_LOST = "node lost"


class LiveCalls(Protocol):
    """What a returning node needs of its coordinator."""

    def live_ids(self) -> list[tuple[str, str]]: ...

    async def cancel(self, session_id: str, call_id: str, force: bool) -> None: ...


class RunningTasks(Protocol):
    """What a returning node needs of its task service."""

    def running_ids(self) -> list[str]: ...

    async def stop(self, task_id: str) -> bool: ...


async def end_lost_node(
    store: Store, gate: GovernanceGate, notify: Notify, node: NodeRecord
) -> None:
    """End every row the lost ``node``'s owner left unfinished (see the module doc), and
    tell the webhooks of the tasks and cron runs that ended so."""
    if node.owner is None:
        log.warning("lost node %s recorded no owner: nothing of it can be found", node.id)
        return
    owners = {node.owner}
    dead = recovery.DeadOwners(elsewhere=frozenset(owners))
    await recovery.interrupt_calls(
        store, dead, NODE_LOST, approvals.NODE_LOST.audit, end_state="error"
    )
    failed = await store.tasks.fail_unfinished(NODE_LOST, owners)
    for record in failed:
        notify("task.finished", record_finished_event(record))
    closed = await store.cron.fail_running(NODE_LOST, time.time(), owners)
    for job_id, run_id in closed:
        notify("cron.run_failed", run_failed_event(job_id, run_id, "error", NODE_LOST))
    tasks, runs = len(failed), len(closed)
    # Its calls are ended now, so its requests are among those nobody waits for.
    denied = await gate.deny_leftovers(approvals.NODE_LOST, owners)
    log.warning(
        "node %s lost: its calls ended, %d task(s) failed, %d cron run(s) closed, "
        "%d approval request(s) denied",
        node.id,
        tasks,
        runs,
        denied,
    )


async def drop_what_was_ended(store: Store, calls: LiveCalls, tasks: RunningTasks) -> None:
    """On a node that finds it was declared dead: force-stop its calls the store shows
    ended (their trees die through the normal stop path; their recorded end stands) and
    stop its tasks that were failed for it."""
    live = calls.live_ids()
    ended = await store.tool_calls.ended_among([call_id for _, call_id in live])
    for session_id, call_id in live:
        # One that ended on its own meanwhile is not live any more: nothing to stop.
        if call_id in ended:
            with contextlib.suppress(ToolCallNotFound, ToolCallConflict):
                await calls.cancel(session_id, call_id, force=True)
    failed = await store.tasks.finished_among(tasks.running_ids())
    for task_id in failed:
        await tasks.stop(task_id)
    if ended or failed:
        log.warning(
            "this node was declared dead: stopped %d call(s) and %d task(s) that were ended "
            "for it meanwhile",
            len(ended),
            len(failed),
        )
