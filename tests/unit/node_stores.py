"""Rows of several servers on one store, for the unit tests of what nodes do to each
other's rows (the ``servers`` fixture in conftest.py makes the stores)."""

from __future__ import annotations

from tether.store.records import ToolCallRecord
from tether.store.store import Store


def owner_of(store: Store) -> str:
    assert store.owner is not None
    return store.owner.id


def call(call_id: str, status: str = "running", task_id: str | None = None) -> ToolCallRecord:
    """A tool call of session ``s`` (its owner is the store's that inserts it)."""
    return ToolCallRecord(
        call_id, "s", task_id, "default", "shell", {}, status, None, None, False, None,
        None, None, 1.0, None,
    )  # fmt: skip
