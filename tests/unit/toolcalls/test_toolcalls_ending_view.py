"""A call read while its end is being saved: it reads as it will once saved (the view
said `completed` and `error` with no reason, and a deadline still counting down; a
client that looked in that moment never learned why the call ended), and two ends of
one call at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from coordinator_parts import small_config

from tether.errors import OutOfStorage
from tether.store.records import ToolCallRecord
from tether.toolcalls import deadlines
from tether.toolcalls.call import Invocation
from tether.toolcalls.index import CallIndex, stored_info
from tether.toolcalls.live_call import LiveCall, live_info
from tether.toolcalls.output import OutputBuffer
from tether.toolcalls.reading import OutputReader
from tether.toolcalls.recorder import CallRecorder


class HeldEndStore:
    """A store whose saving of a call's end waits until released."""

    def __init__(self) -> None:
        self.saving = asyncio.Event()
        self.release = asyncio.Event()
        self.ends: list[dict[str, Any]] = []

    async def record_end(self, call_id: str, **fields: Any) -> None:
        self.ends.append(fields)
        self.saving.set()
        await self.release.wait()


def _running_call(index: CallIndex) -> LiveCall:
    call = LiveCall(
        invocation=Invocation("c1", "s1", "t1", "default", "execute_shell_command", {}),
        status="running",
        deadlines=deadlines.initial(time.monotonic(), 30, 60, None),
        buffer=OutputBuffer(10_000, 1000),
        marker="test:c1",
    )
    index.add(call)
    return call


def _ending_parts() -> tuple[HeldEndStore, CallIndex, CallRecorder, LiveCall]:
    """A store whose end writes are held, its index and recorder, one running call."""
    store = HeldEndStore()
    index = CallIndex(store, 4, 8)  # type: ignore[arg-type]
    recorder = CallRecorder(store, index, small_config())  # type: ignore[arg-type]
    return store, index, recorder, _running_call(index)


async def test_a_call_whose_end_is_being_saved_reads_with_its_reason() -> None:
    store, index, recorder, call = _ending_parts()
    ending = asyncio.create_task(recorder.finish(call, "error", "the output is corrupt", None))
    await store.saving.wait()

    info = await index.info("s1", "c1")
    assert info.status == "completed" and info.end_state == "error"
    assert info.extra["end_reason"] == "the output is corrupt"
    assert info.kill_remaining is None and info.offload_remaining is None
    assert index.list_live("s1") == []
    await asyncio.sleep(0.05)
    assert (await index.info("s1", "c1")).elapsed == info.elapsed  # it has stopped

    store.release.set()
    await ending


async def test_two_ends_of_one_call_at_once_save_the_first_only() -> None:
    store, _, recorder, call = _ending_parts()
    first = asyncio.create_task(recorder.finish(call, "error", "the output is corrupt", None))
    await store.saving.wait()
    second = asyncio.create_task(recorder.finish(call, "cancelled", "cancelled by a user", None))
    await asyncio.sleep(0)
    store.release.set()
    outcomes = await asyncio.gather(first, second)

    assert [end["end_state"] for end in store.ends] == ["error"]
    assert [o.end_state for o in outcomes] == ["error", "error"]
    assert call.end_reason == "the output is corrupt"


async def test_the_live_and_the_stored_view_show_deadlines_by_one_rule() -> None:
    """A call awaiting approval showed its deadlines from memory but not from the store
    (as another node reads it); an ended one shows none in either."""
    index = CallIndex(HeldEndStore(), 4, 8)  # type: ignore[arg-type]
    call = _running_call(index)
    for status in ("awaiting_approval", "running", "offloaded", "completed"):
        call.status = status  # type: ignore[assignment]
        live = live_info(call)
        kill_at, offload_at = deadlines.on_wall_clock(call.deadlines, time.monotonic(), time.time())
        record = ToolCallRecord(
            "c1", "s1", "t1", "default", "execute_shell_command", {}, status, None, None,
            False, None, 60, None, call.started_at, None, kill_at=kill_at, offload_at=offload_at,
        )  # fmt: skip
        stored = stored_info(record)
        shown = status != "completed"
        assert (live.kill_remaining is not None) is shown, status
        assert (stored.kill_remaining is not None) is shown, status


class FullStore(HeldEndStore):
    """A store that cannot take a call's end (its disk is full) until given room."""

    def __init__(self) -> None:
        super().__init__()
        self.room = asyncio.Event()

    async def record_end(self, call_id: str, **fields: Any) -> None:
        self.saving.set()
        if not self.room.is_set():
            raise OutOfStorage("database or disk is full")
        self.ends.append(fields)
        self.release.set()

    async def append_output(self, call_id: str, chunks: Any) -> None:
        return None


async def test_the_last_chunk_of_a_call_whose_end_waits_for_room_is_known() -> None:
    """``done``'s id and a resume after it are worked out from the last chunk; while the
    call's end waited for room, that was unknown (None), as for a running call."""
    store = FullStore()
    index = CallIndex(store, 4, 8)  # type: ignore[arg-type]
    recorder = CallRecorder(store, index, small_config())  # type: ignore[arg-type]
    reader = OutputReader(index, store)  # type: ignore[arg-type]
    call = _running_call(index)
    call.buffer.append("stdout", "a\n")
    assert await reader.final_seq("s1", "c1") is None  # it runs
    call.buffer.append("stdout", "b\n")
    await recorder.finish(call, "success", "", None)
    try:
        assert index.get("s1", "c1") is call  # listed until its end is stored
        assert await reader.final_seq("s1", "c1") == 2
    finally:
        store.room.set()
        await store.release.wait()


class Mirror:
    """The cluster's live copy of output: what it was told of ends."""

    def __init__(self) -> None:
        self.ends: list[tuple[str, int]] = []
        self.told = asyncio.Event()

    def chunk(self, call_id: str, chunk: Any) -> None:
        return None

    def ended(self, call_id: str, last_seq: int) -> None:
        self.ends.append((call_id, last_seq))
        self.told.set()


async def test_other_nodes_are_told_of_an_end_once_it_is_stored() -> None:
    """Told at once, a reader on another node ended its stream and read the call from
    the store, where it still ran: its ``done`` said ``running``."""
    store, mirror = FullStore(), Mirror()
    index = CallIndex(store, 4, 8)  # type: ignore[arg-type]
    recorder = CallRecorder(store, index, small_config(), mirror)  # type: ignore[arg-type]
    call = _running_call(index)
    call.buffer.append("stdout", "a\n")
    await recorder.finish(call, "success", "", None)
    assert mirror.ends == []  # the store has not taken it

    store.room.set()
    await mirror.told.wait()
    assert mirror.ends == [("c1", 1)] and store.ends
    assert index.get("s1", "c1") is None
