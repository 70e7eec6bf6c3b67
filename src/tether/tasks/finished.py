"""What the ``task.finished`` webhook event says about a task: one shape wherever a
task ends (its turn, a restart that could not take it up, the loss of its node)."""

from __future__ import annotations

from typing import Any

from tether.store.records import TaskRecord

# A result's text is cut to this in the event (the whole answer is in the store).
NOTIFIED_TEXT_CHARS = 2000


def finished_event(
    task_id: str, session_id: str, trigger: str, result: dict[str, Any]
) -> dict[str, Any]:
    text = result.get("text")
    if isinstance(text, str):
        result = {**result, "text": text[:NOTIFIED_TEXT_CHARS]}
    return {"task_id": task_id, "session_id": session_id, "trigger": trigger, "result": result}


def record_finished_event(record: TaskRecord) -> dict[str, Any]:
    """The event of a task that ended in the store (its ``result`` set)."""
    return finished_event(record.id, record.session_id, record.trigger, record.result or {})
