"""A call read while its end is being saved: it reads as it will once saved (the view
said `completed` and `error` with no reason, and a deadline still counting down; a
client that looked in that moment never learned why the call ended)."""

from __future__ import annotations

import asyncio
from typing import Any

from coordinator_parts import small_config

from tether.toolcalls import deadlines
from tether.toolcalls.call import Invocation
from tether.toolcalls.index import CallIndex
from tether.toolcalls.live_call import LiveCall
from tether.toolcalls.output import OutputBuffer
from tether.toolcalls.recorder import CallRecorder


class HeldEndStore:
    """A store whose saving of a call's end waits until released."""

    def __init__(self) -> None:
        self.saving = asyncio.Event()
        self.release = asyncio.Event()

    async def record_end(self, call_id: str, **fields: Any) -> None:
        self.saving.set()
        await self.release.wait()


async def test_a_call_whose_end_is_being_saved_reads_with_its_reason() -> None:
    store = HeldEndStore()
    index = CallIndex(store, 4, 8)  # type: ignore[arg-type]
    recorder = CallRecorder(store, index, small_config())  # type: ignore[arg-type]
    call = LiveCall(
        invocation=Invocation("c1", "s1", "t1", "default", "execute_shell_command", {}),
        status="running",
        deadlines=deadlines.initial(0.0, 30, 60, None),
        buffer=OutputBuffer(10_000, 1000),
        marker="test:c1",
    )
    index.add(call)
    ending = asyncio.create_task(recorder.finish(call, "error", "the output is corrupt", None))
    await store.saving.wait()

    info = await index.info("s1", "c1")
    assert info.status == "completed" and info.end_state == "error"
    assert info.extra["end_reason"] == "the output is corrupt"
    assert info.kill_remaining is None and info.offload_remaining is None
    assert index.list_live("s1") == []

    store.release.set()
    await ending
