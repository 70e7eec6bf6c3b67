"""What this node carries out when another node asks (see node_requests.py): the
actions on its calls, stopping its tasks, deciding approvals its calls wait on. Each is
the same method a request on this node would call, so the answer (or the error) is the
one a person asking here would get."""

from __future__ import annotations

from typing import Any

from tether.cluster.node_requests import NodeRequests
from tether.governance.approvals import ApprovalService
from tether.model_texts import TASK_STOPPED
from tether.tasks.service import TaskService
from tether.toolcalls.coordinator import ToolCallCoordinator


def answer_other_nodes(
    requests: NodeRequests,
    coordinator: ToolCallCoordinator,
    tasks: TaskService,
    approvals: ApprovalService,
) -> None:
    async def cancel(args: dict[str, Any]) -> None:
        await coordinator.cancel(args["session_id"], args["call_id"], bool(args["force"]))

    async def offload(args: dict[str, Any]) -> None:
        await coordinator.offload(args["session_id"], args["call_id"])

    async def extend(args: dict[str, Any]) -> None:
        seconds = args["seconds"]
        await coordinator.extend(
            args["session_id"],
            args["call_id"],
            args["target"],
            None if seconds is None else float(seconds),
        )

    async def stop_task(args: dict[str, Any]) -> bool:
        # A node of an earlier version sends no reason.
        return await tasks.stop(args["task_id"], args.get("reason") or TASK_STOPPED)

    requests.handle("call.cancel", cancel)
    requests.handle("call.offload", offload)
    requests.handle("call.extend", extend)
    requests.handle("task.stop", stop_task)
    requests.handle("approval.resolve", approvals.resolve_here)
