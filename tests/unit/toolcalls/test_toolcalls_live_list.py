"""The in-flight list: a call that has ended is never listed, even while its end is
still being saved (the list showed it for the length of that write)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coordinator_parts import no_delivery, small_config

from tether.toolcalls.call import Invocation
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.tools.base import RunContext, Tool, ToolResult


class HeldEndStore:
    """A store whose write of a call's end waits until ``release`` is set."""

    def __init__(self) -> None:
        self.saving_end = asyncio.Event()
        self.release = asyncio.Event()

    async def insert(self, record: Any) -> None:
        return None

    async def update(self, call_id: str, **values: Any) -> None:
        return None

    async def record_end(self, call_id: str, **values: Any) -> bool:
        self.saving_end.set()
        await self.release.wait()
        return True

    async def append_output(self, call_id: str, chunks: Any) -> None:
        return None


async def _instant(args: Mapping[str, Any], ctx: RunContext) -> ToolResult:
    return ToolResult()


async def test_an_ended_call_leaves_the_list_before_its_end_is_saved(tmp_path: Path) -> None:
    store = HeldEndStore()
    config = small_config()
    coordinator = ToolCallCoordinator(store, config, tmp_path, (), no_delivery)  # type: ignore[arg-type]
    tool = Tool("instant", "", {"type": "object"}, _instant)
    run = asyncio.ensure_future(
        coordinator.run(Invocation("c1", "s1", "t1", "default", "instant", {}), tool)
    )
    await asyncio.wait_for(store.saving_end.wait(), 5)
    assert coordinator.list_live("s1") == []
    assert (await coordinator.info("s1", "c1")).status == "completed"
    store.release.set()
    outcome = await asyncio.wait_for(run, 5)
    assert outcome.end_state == "success"
