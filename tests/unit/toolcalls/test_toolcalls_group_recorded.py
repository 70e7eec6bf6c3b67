"""A call's process group reaches the store even when the store refuses it at first (a
full disk): a server that crashed then would otherwise not know the group to reap."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from coordinator_parts import coordinator_on, launching_tool

from tether.errors import OutOfStorage
from tether.toolcalls.call import Invocation


class RefusesTheGroupOnce:
    """A call's row whose first write of the process group finds the disk full."""

    def __init__(self) -> None:
        self.row: dict[str, Any] = {}
        self.refused = 0
        self.group_stored = asyncio.Event()

    async def insert(self, record: Any) -> None:
        self.row = {"status": record.status}

    async def update(self, call_id: str, **values: Any) -> None:
        if "pgid" in values and not self.refused:
            self.refused += 1
            raise OutOfStorage("the database cannot be written (database or disk is full)")
        self.row.update(values)
        if "pgid" in values:
            self.group_stored.set()

    async def record_end(self, call_id: str, **values: Any) -> bool:
        self.row.update(status="completed", **values)
        return True

    async def append_output(self, call_id: str, chunks: Any) -> None:
        return None


async def test_a_process_group_the_store_refused_is_stored_once_it_takes_it(
    tmp_path: Path,
) -> None:
    store = RefusesTheGroupOnce()
    coordinator = coordinator_on(store, tmp_path)
    inv = Invocation("c1", "s", "t1", "default", "held", {})
    outcome = await coordinator.run(inv, launching_tool(tmp_path))
    assert outcome.end_state == "success"
    await asyncio.wait_for(store.group_stored.wait(), timeout=30)
    assert store.refused == 1 and isinstance(store.row["pgid"], int)
