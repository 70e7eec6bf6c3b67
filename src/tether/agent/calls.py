"""Running one requested tool call: find the tool, check its arguments, ask governance,
run it.

The agent's turn and Tether's own MCP endpoint both run calls this way, so a call from
another agent over MCP is governed, recorded and controllable exactly like the model's.
"""

from __future__ import annotations

from dataclasses import replace

from tether import model_texts
from tether.agent.ports import ATTENDED, Attendance, Gate, TurnEvents
from tether.toolcalls.call import CallObserver, CallOutcome, Invocation
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.toolcalls.errors import CapacityExceeded
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
    attendance: Attendance = ATTENDED,
) -> CallOutcome:
    """Run ``inv`` to its end (or until it is offloaded); what the caller is told.

    ``attendance`` says whether a person follows the caller (see governance's
    ``when_unattended``). A call refused before review is audited too.
    """
    tool = tools.get(inv.tool_name)
    if tool is None:
        text = model_texts.no_such_tool(inv.tool_name, tools.names())
        return await _not_run(gate, inv, level, "unknown-tool", text)
    try:
        tool.check(inv.arguments)
    except ToolInputError as exc:
        return await _not_run(gate, inv, level, "invalid-arguments", model_texts.not_run(str(exc)))
    plan = await gate.plan_admission(inv, level, events, attendance)
    if plan.mode == "deny":
        return await coordinator.record_denied(inv, plan.reason)
    inv = replace(inv, judged=plan.judged)
    try:
        return await coordinator.run(inv, tool, ask=plan.ask, observer=observer)
    except ToolInputError as exc:
        cause = "capacity" if isinstance(exc, CapacityExceeded) else "invalid-arguments"
        return await _not_run(gate, inv, level, cause, model_texts.not_run(str(exc)))


async def _not_run(gate: Gate, inv: Invocation, level: str, cause: str, text: str) -> CallOutcome:
    outcome = CallOutcome(end_state="error", offloaded=False, model_text=text)
    await gate.refused(inv, level, cause, outcome.model_text)
    return outcome
