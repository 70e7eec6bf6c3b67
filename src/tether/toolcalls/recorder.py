"""Recording a call: its registration, its moves, its output and its end, in the store."""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from tether.store.records import ToolCallRecord
from tether.store.toolcalls import ToolCallRepository
from tether.store.until_stored import StoreLater
from tether.toolcalls import deadlines as dl
from tether.toolcalls.call import CallObserver, CallOutcome, Invocation
from tether.toolcalls.config import CoordinatorConfig
from tether.toolcalls.index import CallIndex
from tether.toolcalls.live_call import LiveCall, live_info
from tether.toolcalls.mirror import NoMirror, OutputMirror
from tether.toolcalls.outcome import describe_end
from tether.toolcalls.output import OutputBuffer
from tether.toolcalls.state import EndState, Status, check_transition
from tether.tools.base import Tool
from tether.waits import event_within, to_the_end

log = logging.getLogger(__name__)

_FLUSH_INTERVAL = 0.2


class CallRecorder:
    """Keeps the store in step with each live call, and ends calls exactly once."""

    def __init__(
        self,
        repo: ToolCallRepository,
        index: CallIndex,
        config: CoordinatorConfig,
        mirror: OutputMirror | None = None,
    ) -> None:
        self._repo = repo
        self._index = index
        self._config = config
        self._mirror = mirror or NoMirror()
        self._later = StoreLater()

    def _new_buffer(self, call_id: str) -> OutputBuffer:
        config = self._config
        return OutputBuffer(
            config.output_memory_bytes,
            config.model_output_chars,
            config.output_store_bytes,
            on_chunk=functools.partial(self._mirror.chunk, call_id),
        )

    async def register(self, inv: Invocation, tool: Tool | None, status: Status) -> LiveCall:
        """A new live call: indexed and stored with its initial deadlines."""
        config = self._config
        timeout = tool.timeout_of(inv.arguments) if tool else None
        offload_after = config.offload_after if inv.offloadable else None
        deadlines = dl.initial(
            time.monotonic(), timeout, tool.max_timeout if tool else None, offload_after
        )
        call = LiveCall(
            invocation=inv,
            status=status,
            deadlines=deadlines,
            buffer=self._new_buffer(inv.call_id),
            marker=f"{config.marker_prefix}:{inv.call_id}",
        )
        # A call refused outright (no tool) never runs, so it is not held to the limits.
        self._index.add(call, limited=tool is not None)
        # A turn stopped right now still records the call's end, which needs the row: a
        # cancelled INSERT would roll back (PostgreSQL) and leave nothing to end.
        await to_the_end(self._repo.insert(_record_of(call)))
        return call

    async def revive(self, record: ToolCallRecord, kill_at: float | None) -> LiveCall:
        """A call a previous server started, live again under its id: indexed with its
        recorded status, its kill deadline (epoch seconds) and the output already stored
        marked as such (its chunks are numbered the same when read again)."""
        config = self._config
        now_mono, now = time.monotonic(), time.time()
        deadlines = dl.Deadlines(
            started=now_mono - max(0.0, now - record.started_at),
            kill_at=None if kill_at is None else now_mono + (kill_at - now),
            offload_at=None,
            max_timeout=record.max_timeout,
        )
        inv = Invocation(
            record.id,
            record.session_id,
            record.task_id,
            record.agent_id,
            record.tool_name,
            record.arguments,
        )
        call = LiveCall(
            invocation=inv,
            status=record.status,  # type: ignore[arg-type]
            deadlines=deadlines,
            buffer=self._new_buffer(record.id),
            marker=f"{config.marker_prefix}:{record.id}",
            started_at=record.started_at,
            offload_reason=record.offload_reason,
        )
        call.buffer.mark_persisted(await self._repo.last_output_seq(record.id))
        self._index.add(call)
        await self.store_deadlines(call)
        return call

    async def transition(self, call: LiveCall, target: Status) -> None:
        """Move the call to ``target`` (TransitionError if not allowed) and store it; a
        move the store refuses (a full disk) is taken back."""
        check_transition(call.status, target)
        before, call.status = call.status, target
        try:
            await self._repo.update(
                call.call_id,
                session_id=call.session_id,
                status=target,
                offload_reason=call.offload_reason,
                **_wall_deadlines(call),
            )
        except Exception:
            if call.status == target:  # nothing moved it on meanwhile
                call.status = before
            raise

    async def store_deadlines(self, call: LiveCall) -> None:
        """Store the call's deadlines as they are now (after an extend, say)."""
        await self._repo.update(call.call_id, session_id=call.session_id, **_wall_deadlines(call))

    async def record_process(self, call: LiveCall) -> None:
        """Store the call's process group, so a later start can reap it after a crash;
        a write the store refuses for a while (a full disk) is tried again until it lands
        (the group unrecorded, a crash meanwhile would leave the call's tree running)."""
        if call.process is not None:
            write = functools.partial(self._repo.update, call.call_id, pgid=call.process.pgid)
            await self._later.store(write, f"the process group of call {call.call_id}")

    async def finish(
        self, call: LiveCall, end_state: EndState, summary: str, observer: CallObserver | None
    ) -> CallOutcome:
        """End the call: save the rest of its output and its end, and say what the model
        sees. A call ends once; a second finish only repeats the text."""
        async with call.ending:  # a second finish waits for the first, then repeats it
            return await self._end(call, end_state, summary, observer)

    async def _end(
        self, call: LiveCall, end_state: EndState, summary: str, observer: CallObserver | None
    ) -> CallOutcome:
        where = self._config.where_output_is(call.session_id, call.call_id)
        limit = self._config.model_output_chars
        if call.finished.is_set():
            return CallOutcome(call.end_state, False, describe_end(call, summary, where, limit))
        # Measured before the call reads as ended: a look meanwhile sees it whole.
        call.resources = await _resources_of(call)
        call.status, call.end_state, call.end_reason = "completed", end_state, summary
        call.finished_at = time.time()
        call.buffer.close()
        model_text = describe_end(call, summary, where, limit)
        async with call.persist_lock:  # the rest of the output and the end: one write
            pending = call.buffer.unpersisted()
            record_end = functools.partial(
                self._repo.record_end,
                call.call_id,
                output=pending,
                session_id=call.session_id,
                end_state=end_state,
                end_reason=summary or None,
                force_cancelled=call.force_cancelled,
                offload_reason=call.offload_reason,
                result=model_text,
                finished_at=call.finished_at,
                resources=call.resources,
            )
            # The call has ended all the same: what waits on it goes on. It stays
            # listed (as ended) until its row is written: at once, once the store
            # takes it (a full disk), or by the next start.
            await self._later.store(
                record_end,
                f"the end of call {call.call_id}",
                then=functools.partial(self._stored_end, call),
            )
            if pending:
                call.buffer.mark_persisted(pending[-1].seq)
        call.finished.set()
        if observer:
            observer.ended(live_info(call))
        return CallOutcome(end_state=end_state, offloaded=False, model_text=model_text)

    def _stored_end(self, call: LiveCall) -> None:
        """The call's end is in the store: it is forgotten here, and other nodes told it
        ended (told sooner, a reader there read the store, found the call running, and
        ended its stream with ``done`` saying so)."""
        self._index.forget(call)
        self._mirror.ended(call.call_id, call.buffer.last_seq)

    def stop_storing(self) -> None:
        """At an exit: give up the writes still being tried (the next start's recovery
        ends the rows they were for)."""
        self._later.give_up()

    async def persist_output(self, call: LiveCall) -> None:
        """Write the output not yet stored."""
        # One writer at a time per call: the flusher and the final save must not both
        # write the same chunks.
        async with call.persist_lock:
            pending = call.buffer.unpersisted()
            if pending:
                await self._repo.append_output(call.call_id, pending)
                call.buffer.mark_persisted(pending[-1].seq)

    async def flush_output(self, call: LiveCall) -> None:
        """Save output to the store in batches while the call runs.

        A quiet call parks on its buffer at no cost (a thousand sleeping calls must not
        wake the loop); a finished call is saved by finish, so this returns at once.
        """
        flushed = 0
        while True:
            await call.buffer.wait(flushed)
            if call.buffer.closed:
                return
            if await event_within(call.finished, _FLUSH_INTERVAL):
                return
            flushed = call.buffer.last_seq
            try:
                await self.persist_output(call)
            except Exception:
                log.exception("saving output of %s failed; will retry", call.call_id)


async def _resources_of(call: LiveCall) -> dict[str, Any] | None:
    """What the call's tree used, with ``killed_by`` completed by what the coordinator
    itself stopped it for (its deadline, or a cancel) when the launcher cannot tell
    (one that can, the runner, records its own)."""
    measured = await call.process.resources() if call.process is not None else None
    if measured is None:
        return None
    resources = measured.as_dict()
    if resources["killed_by"] is None and call.end_cause is None:
        if call.timed_out:
            resources["killed_by"] = "deadline"
        elif call.stop_reason is not None:
            resources["killed_by"] = "cancel"
    return resources


def _wall_deadlines(call: LiveCall) -> dict[str, float | None]:
    kill_at, offload_at = dl.on_wall_clock(call.deadlines, time.monotonic(), time.time())
    return {"kill_at": kill_at, "offload_at": offload_at}


def _record_of(call: LiveCall) -> ToolCallRecord:
    inv = call.invocation
    kill_at, offload_at = dl.on_wall_clock(call.deadlines, time.monotonic(), time.time())
    return ToolCallRecord(
        id=inv.call_id,
        session_id=inv.session_id,
        task_id=inv.task_id,
        agent_id=inv.agent_id,
        tool_name=inv.tool_name,
        arguments=inv.arguments,
        status=call.status,
        end_state=None,
        end_reason=None,
        force_cancelled=False,
        offload_reason=None,
        max_timeout=call.deadlines.max_timeout,
        result=None,
        started_at=call.started_at,
        finished_at=None,
        kill_at=kill_at,
        offload_at=offload_at,
    )
