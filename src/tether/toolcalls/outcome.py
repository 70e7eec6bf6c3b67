"""What the model is told about a call: its output and how it ended (pure; the texts
themselves are in ``tether.model_texts``)."""

from __future__ import annotations

from tether import model_texts
from tether.toolcalls.live_call import LiveCall


def describe_offload(call: LiveCall) -> str:
    return model_texts.offloaded(call.call_id)


def describe_end(call: LiveCall, summary: str, where: str, limit: int) -> str:
    """The tool result text: the output (capped at ``limit`` characters, head and tail
    kept) plus a line on how it ended."""
    output = call.buffer.model_view(limit, where) if call.buffer.total_chars else ""
    end = call.end_state
    if end == "denied":
        return model_texts.denied(summary)
    if end == "cancelled":
        return _join(output, model_texts.cancelled(summary))
    if end == "timeout":
        return _join(output, model_texts.TIMED_OUT)
    return _join(output, model_texts.exit_status(summary)) or model_texts.NO_OUTPUT


def _join(output: str, note: str) -> str:
    if not output:
        return note
    sep = "" if output.endswith("\n") else "\n"
    return f"{output}{sep}{note}" if note else output
