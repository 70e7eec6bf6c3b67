"""The coordinator: runs tool calls and lets people watch, extend, offload and cancel them.

The agent awaits :meth:`ToolCallCoordinator.run` for each call. It returns when the call
ends, or at once when the call is moved to the background; in that case the call keeps
running here and its result is handed to ``on_background_result`` when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from tether.store.records import OutputChunk, ToolCallRecord
from tether.store.toolcalls import ToolCallRepository
from tether.toolcalls import deadlines as dl
from tether.toolcalls import process_tree
from tether.toolcalls.errors import ToolCallConflict, ToolCallNotFound
from tether.toolcalls.live import CallInfo, Invocation, LiveCall, live_info, stored_info
from tether.toolcalls.outcome import CallOutcome, describe_end, describe_offload
from tether.toolcalls.output import OutputBuffer
from tether.toolcalls.state import EndState, TransitionError, check_transition
from tether.tools.base import Tool, ToolInputError, ToolResult

log = logging.getLogger(__name__)

_FLUSH_INTERVAL = 0.2


@dataclass(frozen=True)
class Admission:
    """A person's (or policy's) answer to whether a call may run."""

    allowed: bool
    reason: str = ""
    by_human: bool = False


class CallObserver(Protocol):
    """Receives a call's life events (the chat stream uses this)."""

    def started(self, info: CallInfo) -> None: ...
    def output(self, call_id: str, chunk: OutputChunk) -> None: ...
    def ended(self, info: CallInfo) -> None: ...


@dataclass(frozen=True)
class CoordinatorConfig:
    offload_after: float | None
    cancel_grace: float
    model_output_chars: int
    output_memory_bytes: int
    max_per_session: int
    max_total: int
    marker_prefix: str
    # Output kept per call (memory and store together); None: unlimited.
    output_store_bytes: int | None = None


class _Context:
    """The RunContext a tool receives."""

    def __init__(
        self, coordinator: ToolCallCoordinator, call: LiveCall, observer: CallObserver | None
    ) -> None:
        self._coordinator = coordinator
        self._call = call
        self._observer = observer
        self.call_id = call.call_id
        self.workspace = coordinator.workspace
        self.marker = call.marker
        self.protected = coordinator.protected
        self.human_approved = call.human_approved

    def emit(self, stream: str, text: str) -> None:
        chunk = self._call.buffer.append(stream, text)
        if chunk is not None and self._observer is not None:
            self._observer.output(self.call_id, chunk)

    def attach_process(self, pid: int, pgid: int) -> None:
        call = self._call
        call.pid, call.pgid = pid, pgid
        self._coordinator.spawn(self._coordinator.repo.update(self.call_id, pgid=pgid))
        if call.stop_reason is not None and not call.signalled:
            # A stop arrived between the spawn and now, when there was no tree to signal.
            self._coordinator.spawn(
                self._coordinator.stop_again(call, call.stop_reason, call.force_cancelled)
            )


class ToolCallCoordinator:
    """The in-flight registry and everything that acts on a call while it runs."""

    def __init__(
        self,
        repo: ToolCallRepository,
        config: CoordinatorConfig,
        workspace: Any,
        protected: tuple[Any, ...],
        on_background_result: Callable[[str, str, str], Awaitable[None]],
    ) -> None:
        self.repo = repo
        self.config = config
        self.workspace = workspace
        self.protected = protected
        self._on_background_result = on_background_result
        self._live: dict[str, LiveCall] = {}
        self._by_session: dict[str, dict[str, LiveCall]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._closing = False

    # ----------------------------------------------------------------- running calls

    async def run(
        self,
        inv: Invocation,
        tool: Tool,
        *,
        admission: Callable[[], Awaitable[Admission]] | None = None,
        observer: CallObserver | None = None,
    ) -> CallOutcome:
        """Run one call to its end (or until it is offloaded) and say what the model sees."""
        self._check_capacity(inv.session_id)
        try:
            return await self._run(inv, tool, admission, observer)
        except asyncio.CancelledError:
            # The turn was stopped, perhaps before the tool even started: never leave the
            # call registered as running.
            call = self._live.get(inv.call_id)
            if call is not None and not call.finished.is_set():
                reason = call.stop_reason or "the task was stopped"
                await asyncio.shield(self._stop_and_finish(call, reason, observer))
            raise

    async def _run(
        self,
        inv: Invocation,
        tool: Tool,
        admission: Callable[[], Awaitable[Admission]] | None,
        observer: CallObserver | None,
    ) -> CallOutcome:
        call = await self._register(inv, tool, "awaiting_approval" if admission else "running")
        if observer:
            observer.started(live_info(call))
        if admission is not None:
            verdict = await self._await_admission(call, admission)
            if not verdict.allowed:
                return await self._finish(call, None, "denied", verdict.reason, observer)
            call.human_approved = verdict.by_human
            await self._transition(call, "running")
        return await self._execute(call, tool, observer)

    async def record_denied(self, inv: Invocation, tool_name_reason: str) -> CallOutcome:
        """Record a call policy refused outright; it never runs."""
        call = await self._register(inv, None, "awaiting_approval")
        return await self._finish(call, None, "denied", tool_name_reason, None)

    async def _await_admission(
        self, call: LiveCall, admission: Callable[[], Awaitable[Admission]]
    ) -> Admission:
        waiting = asyncio.ensure_future(admission())
        call.work = waiting
        try:
            return await waiting
        except asyncio.CancelledError:
            if call.stop_reason is None:
                raise
            return Admission(False, f"The call was cancelled ({call.stop_reason}) before approval.")

    async def _execute(
        self, call: LiveCall, tool: Tool, observer: CallObserver | None
    ) -> CallOutcome:
        if call.stop_reason is not None:  # stopped while it was being set up
            return await self._finish(call, None, "cancelled", call.stop_reason, observer)
        ctx = _Context(self, call, observer)
        call.work = asyncio.ensure_future(tool.run(call.invocation.arguments, ctx))
        watcher = self.spawn(self._watch_deadlines(call))
        flusher = self.spawn(self._flush_output(call))
        released = asyncio.create_task(call.released.wait())
        try:
            await asyncio.wait({call.work, released}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The turn was stopped: stop the call too and record it, then let the
            # cancellation go on.
            released.cancel()
            reason = "server shutdown" if self._closing else "the task was stopped"
            await asyncio.shield(self._stop_and_finish(call, reason, observer))
            raise
        released.cancel()
        if not call.work.done():
            self.spawn(self._finish_in_background(call, observer, watcher, flusher))
            return CallOutcome(end_state=None, offloaded=True, model_text=describe_offload(call))
        return await self._conclude(call, observer, watcher, flusher)

    async def _conclude(
        self,
        call: LiveCall,
        observer: CallObserver | None,
        watcher: asyncio.Task[Any],
        flusher: asyncio.Task[Any],
    ) -> CallOutcome:
        assert call.work is not None
        end_state, summary = _end_of(call, call.work)
        watcher.cancel()
        outcome = await self._finish(call, call.work, end_state, summary, observer)
        await flusher
        return outcome

    async def _finish_in_background(
        self,
        call: LiveCall,
        observer: CallObserver | None,
        watcher: asyncio.Task[Any],
        flusher: asyncio.Task[Any],
    ) -> None:
        assert call.work is not None
        with contextlib.suppress(BaseException):
            await asyncio.wait({call.work})
        outcome = await self._conclude(call, observer, watcher, flusher)
        try:
            await self._on_background_result(call.session_id, call.call_id, outcome.model_text)
        except Exception:
            log.exception("delivering the background result of %s failed", call.call_id)

    async def _stop_and_finish(
        self, call: LiveCall, reason: str, observer: CallObserver | None
    ) -> None:
        await self._stop(call, reason, force=False)
        if call.work is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait({call.work})
        if not call.finished.is_set():
            await self._finish(call, call.work, "cancelled", reason, observer)

    # ----------------------------------------------------------------- bookkeeping

    async def _register(self, inv: Invocation, tool: Tool | None, status: Any) -> LiveCall:
        now = time.monotonic()
        timeout = tool.timeout_of(inv.arguments) if tool else None
        deadlines = dl.initial(
            now, timeout, tool.max_timeout if tool else None, self.config.offload_after
        )
        call = LiveCall(
            invocation=inv,
            status=status,
            deadlines=deadlines,
            buffer=OutputBuffer(
                self.config.output_memory_bytes,
                self.config.model_output_chars,
                self.config.output_store_bytes,
            ),
            marker=f"{self.config.marker_prefix}:{inv.call_id}",
        )
        self._live[inv.call_id] = call
        self._by_session.setdefault(inv.session_id, {})[inv.call_id] = call
        await self.repo.insert(_record_of(call))
        return call

    async def unique_call_id(self, proposed: str) -> str:
        """The model's call id, made unique if a call with that id was already seen."""
        candidate, n = proposed, 1
        while candidate in self._live or await self.repo.exists(candidate):
            n += 1
            candidate = f"{proposed}~{n}"
        return candidate

    def _check_capacity(self, session_id: str) -> None:
        in_session = len(self._by_session.get(session_id, {}))
        if in_session >= self.config.max_per_session or len(self._live) >= self.config.max_total:
            raise ToolInputError(
                "too many tool calls are in flight; wait for some to finish and try again"
            )

    async def _transition(self, call: LiveCall, target: Any) -> None:
        check_transition(call.status, target)
        call.status = target
        await self.repo.update(call.call_id, status=target, offload_reason=call.offload_reason)

    async def _finish(
        self,
        call: LiveCall,
        work: asyncio.Future[Any] | None,
        end_state: EndState,
        summary: str,
        observer: CallObserver | None,
    ) -> CallOutcome:
        if call.finished.is_set():
            return CallOutcome(
                call.end_state,
                False,
                describe_end(call, summary, self._where(call), self.config.model_output_chars),
            )
        call.status, call.end_state, call.end_reason = "completed", end_state, summary
        call.buffer.close()
        model_text = describe_end(call, summary, self._where(call), self.config.model_output_chars)
        await self._persist_output(call)
        await self.repo.update(
            call.call_id,
            status="completed",
            end_state=end_state,
            end_reason=summary or None,
            force_cancelled=call.force_cancelled,
            result=model_text,
            finished_at=time.time(),
        )
        self._forget(call)
        call.finished.set()
        if observer:
            observer.ended(live_info(call))
        return CallOutcome(end_state=end_state, offloaded=False, model_text=model_text)

    def _forget(self, call: LiveCall) -> None:
        self._live.pop(call.call_id, None)
        session = self._by_session.get(call.session_id)
        if session is not None:
            session.pop(call.call_id, None)
            if not session:
                del self._by_session[call.session_id]

    def _where(self, call: LiveCall) -> str:
        return f"/api/tool-calls/{call.session_id}/{call.call_id}/output"

    async def _persist_output(self, call: LiveCall) -> None:
        # One writer at a time per call: the flusher and the final save must not both
        # write the same chunks.
        async with call.persist_lock:
            pending = call.buffer.unpersisted()
            if pending:
                await self.repo.append_output(call.call_id, pending)
                call.buffer.mark_persisted(pending[-1].seq)

    async def _flush_output(self, call: LiveCall) -> None:
        """Save output to the store in batches while the call runs.

        A quiet call parks on its buffer at no cost (a thousand sleeping calls must not
        wake the loop); a finished call is saved by _finish, so this returns at once.
        """
        flushed = 0
        while True:
            await call.buffer.wait(flushed)
            if call.buffer.closed:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(call.finished.wait(), _FLUSH_INTERVAL)
            if call.finished.is_set():
                return
            flushed = call.buffer.last_seq
            try:
                await self._persist_output(call)
            except Exception:
                log.exception("saving output of %s failed; will retry", call.call_id)

    async def _watch_deadlines(self, call: LiveCall) -> None:
        while call.status in ("running", "offloaded"):
            due = call.deadlines.next_due()
            delay = None if due is None else max(0.0, due - time.monotonic())
            try:
                await asyncio.wait_for(call.deadline_changed.wait(), delay)
                call.deadline_changed.clear()
                continue
            except TimeoutError:
                pass
            now = time.monotonic()
            kill_at, offload_at = call.deadlines.kill_at, call.deadlines.offload_at
            if kill_at is not None and now >= kill_at:
                call.timed_out = True
                await self._stop(call, "its deadline passed", force=False)
                return
            if offload_at is not None and now >= offload_at:
                call.deadlines = replace(call.deadlines, offload_at=None)
                if call.status == "running":
                    await self._offload(call, "deadline")

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run a coroutine the coordinator owns, keeping a reference until it ends."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # ----------------------------------------------------------------- user actions

    def list_live(self, session_id: str) -> list[CallInfo]:
        """Calls in flight for a session, oldest first.

        A call that has ended is left out even while its end is still being saved."""
        calls = self._by_session.get(session_id, {}).values()
        in_flight = (live_info(c) for c in calls if c.status != "completed")
        return sorted(in_flight, key=lambda i: i.started_at)

    def _live_call(self, session_id: str, call_id: str) -> LiveCall | None:
        call = self._live.get(call_id)
        return call if call is not None and call.session_id == session_id else None

    async def info(self, session_id: str, call_id: str) -> CallInfo:
        call = self._live_call(session_id, call_id)
        if call is not None:
            return live_info(call)
        record = await self.repo.get(session_id, call_id)
        if record is None:
            raise ToolCallNotFound(call_id)
        return stored_info(record)

    async def _require_live(self, session_id: str, call_id: str) -> LiveCall:
        call = self._live_call(session_id, call_id)
        if call is not None:
            return call
        if await self.repo.get(session_id, call_id) is None:
            raise ToolCallNotFound(call_id)
        raise ToolCallConflict("the tool call has already completed")

    async def cancel(self, session_id: str, call_id: str, force: bool) -> None:
        """Stop a call: SIGTERM to its process tree then SIGKILL, or SIGKILL at once."""
        call = await self._require_live(session_id, call_id)
        self.spawn(self._stop(call, "cancelled by the user", force=force))

    async def offload(self, session_id: str, call_id: str) -> CallInfo:
        """Move a running call to the background; the model carries on without it."""
        call = await self._require_live(session_id, call_id)
        if call.status != "running":
            raise ToolCallConflict(
                f"only a running call can be offloaded; this one is {call.status}"
            )
        await self._offload(call, "user")
        return live_info(call)

    async def _offload(self, call: LiveCall, reason: str) -> None:
        call.offload_reason = reason
        try:
            await self._transition(call, "offloaded")
        except TransitionError:
            return
        call.released.set()

    async def extend(
        self, session_id: str, call_id: str, target: dl.DeadlineTarget, seconds: float | None
    ) -> CallInfo:
        """Move the kill or offload deadline later, or remove it (``seconds=None``)."""
        call = await self._require_live(session_id, call_id)
        if call.status not in ("running", "offloaded"):
            raise ToolCallConflict(f"deadlines apply to running calls; this one is {call.status}")
        if target == "offload" and call.status == "offloaded":
            raise ToolCallConflict("the call is already in the background")
        try:
            call.deadlines = dl.extend(call.deadlines, target, seconds, time.monotonic())
        except dl.DeadlineError as exc:
            raise ToolCallConflict(str(exc)) from exc
        call.deadline_changed.set()
        return live_info(call)

    async def _stop(self, call: LiveCall, reason: str, force: bool) -> None:
        await self._stop_many([call], reason, force)

    async def stop_again(self, call: LiveCall, reason: str, force: bool) -> None:
        """Stop a call whose process appeared after it was told to stop."""
        await self._stop_many([call], reason, force)

    async def _stop_many(self, calls: list[LiveCall], reason: str, force: bool) -> None:
        """Stop calls together: one scan of the process table for all their trees."""
        targets: list[process_tree.Target] = []
        for call in calls:
            if call.finished.is_set():
                continue
            if call.stop_reason is None or force:
                call.stop_reason = call.stop_reason or reason
                call.force_cancelled = call.force_cancelled or force
            if call.pid is None:
                if call.work is not None:
                    call.work.cancel()
                continue
            # A graceful stop already under way ends in SIGKILL after the grace period;
            # asking again (the task stopped too, say) needs no second pass.
            if call.signalled and not force:
                continue
            call.signalled = True
            targets.append(
                process_tree.Target(call.pid, call.pgid, call.marker, since=call.started_at)
            )
        if targets:
            await asyncio.to_thread(
                process_tree.terminate_many, targets, self.config.cancel_grace, force
            )

    async def stop_task(self, task_id: str, reason: str) -> None:
        """Stop every call a task started, including ones in the background."""
        calls = [c for c in self._live.values() if c.invocation.task_id == task_id]
        await self._stop_many(calls, reason, force=False)

    # ----------------------------------------------------------------- output

    async def output_text(self, session_id: str, call_id: str) -> tuple[str, bool, str | None]:
        """(output so far, closed?, end state) for a live or finished call."""
        call = self._live_call(session_id, call_id)
        if call is not None:
            chunks = await self._chunks_since(call, 0)
            return "".join(c.text for c in chunks), call.buffer.closed, call.end_state
        record = await self.repo.get(session_id, call_id)
        if record is None:
            raise ToolCallNotFound(call_id)
        chunks = await self.repo.read_output(call_id)
        return "".join(c.text for c in chunks), True, record.end_state

    async def _chunks_since(self, call: LiveCall, seq: int) -> list[OutputChunk]:
        if seq + 1 >= call.buffer.first_seq_in_memory:
            return call.buffer.since(seq)
        stored = await self.repo.read_output(call.call_id, seq)
        last = stored[-1].seq if stored else seq
        return stored + call.buffer.since(last)

    async def follow(
        self, session_id: str, call_id: str, after_seq: int
    ) -> AsyncIterator[OutputChunk | CallInfo]:
        """Output chunks after ``after_seq`` as they come, then the final info."""
        call = self._live_call(session_id, call_id)
        if call is None:
            await self.info(session_id, call_id)  # raises if unknown
            for chunk in await self.repo.read_output(call_id, after_seq):
                yield chunk
            yield await self.info(session_id, call_id)
            return
        seq = after_seq
        while True:
            for chunk in await self._chunks_since(call, seq):
                seq = chunk.seq
                yield chunk
            if call.buffer.closed:
                break
            await call.buffer.wait(seq)
        await call.finished.wait()
        yield live_info(call)

    async def ensure_known(self, session_id: str, call_id: str) -> None:
        """Raise ToolCallNotFound unless the call exists in this session."""
        await self.info(session_id, call_id)

    # ----------------------------------------------------------------- lifecycle

    def begin_shutdown(self) -> None:
        """From now on, calls stopped with their task are recorded as stopped by shutdown."""
        self._closing = True

    async def shutdown(self) -> None:
        """Stop every call in flight and record it as cancelled (reason: shutdown)."""
        self._closing = True
        calls = list(self._live.values())
        await self._stop_many(calls, "server shutdown", force=False)
        await asyncio.gather(
            *(self._stop_and_finish(c, "server shutdown", None) for c in calls),
            return_exceptions=True,
        )
        for task in list(self._background):
            task.cancel()


def _end_of(call: LiveCall, work: asyncio.Task[Any]) -> tuple[EndState, str]:
    """The end state of a call whose work finished, and a one-line summary."""
    if call.timed_out:
        return "timeout", "timed out and was killed"
    if call.stop_reason is not None:
        return "cancelled", call.stop_reason
    if work.cancelled():
        return "cancelled", "cancelled"
    exc = work.exception()
    if isinstance(exc, ToolInputError):
        return "error", str(exc)
    if exc is not None:
        log.error("tool %s failed", call.invocation.tool_name, exc_info=exc)
        return "error", f"{type(exc).__name__}: {exc}"
    result: ToolResult = work.result()
    return ("error" if result.is_error else "success"), result.summary


def _record_of(call: LiveCall) -> ToolCallRecord:
    inv = call.invocation
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
    )
