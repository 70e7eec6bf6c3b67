"""A call whose wait for approval fails (the store refused the decision's write: a
full disk) ends ``error`` and is not listed any more; it stayed ``awaiting_approval``
for good, its turn failed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from coordinator_parts import coordinator_on
from test_toolcalls_offload_while_ending import OneRow

from tether.errors import OutOfStorage
from tether.toolcalls.call import Admission, Invocation
from tether.tools.base import RunContext, Tool, ToolResult

FULL = "the database cannot be written (database or disk is full)"


async def test_a_call_whose_approval_wait_fails_ends_error(tmp_path: Path) -> None:
    store = OneRow()
    coordinator = coordinator_on(store, tmp_path)
    ran: list[Mapping[str, Any]] = []

    async def run(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        ran.append(args)
        return ToolResult(summary="exit code 0")

    async def ask() -> Admission:
        raise OutOfStorage(FULL)

    tool = Tool("asks", "", {"type": "object"}, run, timeout_of=lambda _args: 60.0)
    inv = Invocation("c1", "s1", "t1", "default", "asks", {})
    with pytest.raises(OutOfStorage):
        await coordinator.run(inv, tool, ask=ask)
    assert ran == []
    assert coordinator.list_live("s1") == []
    assert (store.row["status"], store.row["end_state"]) == ("completed", "error")
    assert FULL in store.row["end_reason"]
