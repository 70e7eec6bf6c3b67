"""What the model is told about a call (pure text building)."""

from __future__ import annotations

from tether.toolcalls.live_call import LiveCall


def describe_offload(call: LiveCall) -> str:
    return (
        f"[tether] This call was moved to the background (tool_call_id "
        f"{call.call_id!r}) and is still running. Its result will arrive in a later "
        f"message. Carry on without waiting for it; do not start it again."
    )


def describe_end(call: LiveCall, summary: str, where: str, limit: int) -> str:
    """The tool result text: the output (capped at ``limit`` characters, head and tail
    kept) plus a line on how it ended."""
    output = call.buffer.model_view(limit, where) if call.buffer.total_chars else ""
    end = call.end_state
    if end == "denied":
        return f"[tether] This call was denied and did not run. {summary}".strip()
    if end == "cancelled":
        note = "[tether] The user cancelled this call before it finished"
        if summary and summary != "cancelled by the user":
            note = f"[tether] This call was stopped before it finished ({summary})"
        return _join(output, f"{note}. Output up to that point is above, if any.")
    if end == "timeout":
        return _join(output, "[tether] The call ran past its deadline and was killed.")
    status = f"[{summary}]" if summary else ""
    return _join(output, status) or "[no output]"


def _join(output: str, note: str) -> str:
    if not output:
        return note
    sep = "" if output.endswith("\n") else "\n"
    return f"{output}{sep}{note}" if note else output
