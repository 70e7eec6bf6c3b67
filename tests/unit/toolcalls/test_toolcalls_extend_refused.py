"""An extension the store refuses (a full disk: a 507, "nothing of this write was
kept") leaves the call's deadline as it was; it moved all the same, in the server
but not in the keeper's runner, which had not been told."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from coordinator_parts import no_delivery, small_config
from test_toolcalls_offload_while_ending import OneRow

from tether.errors import OutOfStorage
from tether.toolcalls.call import Invocation
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.tools.base import RunContext, Tool, ToolResult


class FullDisk(OneRow):
    """The row, on a disk that fills once ``full`` is set."""

    full = False

    async def update(self, call_id: str, **values: Any) -> None:
        if self.full:
            raise OutOfStorage("the database cannot be written (database or disk is full)")
        await super().update(call_id, **values)


async def test_an_extension_the_store_refuses_changes_nothing(tmp_path: Path) -> None:
    store = FullDisk()
    coordinator = ToolCallCoordinator(
        store,  # type: ignore[arg-type]
        small_config(),
        tmp_path,
        (),
        no_delivery,
    )
    returns = asyncio.Event()

    async def held(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
        await returns.wait()
        return ToolResult(summary="exit code 0")

    tool = Tool("held", "", {"type": "object"}, held, timeout_of=lambda _args: 60.0)
    run = asyncio.ensure_future(
        coordinator.run(Invocation("c1", "s", "t1", "default", "held", {}), tool)
    )
    while not coordinator.live_count():
        await asyncio.sleep(0.001)
    store.full = True
    with pytest.raises(OutOfStorage):
        await coordinator.extend("s", "c1", "kill", 30)
    (info,) = coordinator.list_live("s")
    assert info.kill_remaining is not None and info.kill_remaining <= 60
    store.full = False
    returns.set()
    assert (await asyncio.wait_for(run, 5)).end_state == "success"
