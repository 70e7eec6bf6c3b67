"""A call being stopped (its tree in its grace period after a cancel) cannot be moved to
the background: the turn was told it "is still running" and to carry on without it,
then got word that it was cancelled."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_toolcalls_extend_while_stopping import start_held

from tether.toolcalls.errors import ToolCallConflict


async def test_an_offload_during_a_graceful_cancel_is_refused(tmp_path: Path) -> None:
    """Refused, as an extend then is."""
    coordinator, launcher, call = await start_held(tmp_path, timeout=60)
    while coordinator.live_count() == 0 or (await coordinator.info("s", "c1")).status != "running":
        await asyncio.sleep(0.001)
    await coordinator.cancel("s", "c1", force=False)
    await asyncio.wait_for(launcher.stopped.wait(), 5)
    refused: ToolCallConflict | None = None
    try:
        await coordinator.offload("s", "c1")
    except ToolCallConflict as exc:
        refused = exc
    launcher.process.done.set()
    outcome = await asyncio.wait_for(call, 5)

    assert refused is not None and "being stopped" in str(refused)
    assert not outcome.offloaded and outcome.end_state == "cancelled"
