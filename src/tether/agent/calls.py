"""Running one requested tool call: find the tool, ask governance, run it.

The agent's turn and Tether's own MCP endpoint both run calls this way, so a call from
another agent over MCP is governed, recorded and controllable exactly like the model's.
"""

from __future__ import annotations

from tether.agent.ports import Gate, TurnEvents
from tether.toolcalls.call import CallObserver, CallOutcome, Invocation
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.tools.base import ToolInputError
from tether.tools.registry import ToolRegistry


async def run_tool_call(
    inv: Invocation,
    tools: ToolRegistry,
    gate: Gate,
    coordinator: ToolCallCoordinator,
    level: str,
    events: TurnEvents,
    observer: CallObserver | None = None,
) -> CallOutcome:
    """Run ``inv`` to its end (or until it is offloaded); what the caller is told."""
    tool = tools.get(inv.tool_name)
    if tool is None:
        return _not_run(f"There is no tool named {inv.tool_name!r}. Available: {tools.names()}")
    plan = await gate.plan_admission(inv, level, events)
    if plan.mode == "deny":
        return await coordinator.record_denied(inv, plan.reason)
    try:
        return await coordinator.run(inv, tool, ask=plan.ask, observer=observer)
    except ToolInputError as exc:
        return _not_run(f"The call was not run: {exc}")


def _not_run(text: str) -> CallOutcome:
    return CallOutcome(end_state="error", offloaded=False, model_text=f"[tether] {text}")
