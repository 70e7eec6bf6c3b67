"""Running a call: admission, the tool's work, its end or its move to the background."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tether import model_texts
from tether.toolcalls.actions import CallActions
from tether.toolcalls.call import Admission, CallObserver, CallOutcome, Invocation, ResultLost
from tether.toolcalls.index import CallIndex
from tether.toolcalls.launcher import Launcher
from tether.toolcalls.live_call import LiveCall, live_info
from tether.toolcalls.outcome import describe_offload
from tether.toolcalls.owned_tasks import OwnedTasks
from tether.toolcalls.recorder import CallRecorder
from tether.toolcalls.state import EndState
from tether.toolcalls.tool_context import ToolContext
from tether.tools.base import Tool, ToolInputError, ToolResult

log = logging.getLogger(__name__)

Ask = Callable[[], Awaitable[Admission]]
BackgroundResult = Callable[[str, str, str], Awaitable[None]]


class CallRunner:
    """Takes a call from the model's request to its recorded end."""

    def __init__(
        self,
        index: CallIndex,
        recorder: CallRecorder,
        actions: CallActions,
        launcher: Launcher,
        tasks: OwnedTasks,
        tool_scope: tuple[Path, tuple[Path, ...]],
        on_background_result: BackgroundResult | None,
    ) -> None:
        self._index = index
        self._recorder = recorder
        self._actions = actions
        self._launcher = launcher
        self._tasks = tasks
        self._workspace, self._protected = tool_scope
        self.on_background_result = on_background_result
        # Set at shutdown, so calls stopped with their turn say why.
        self.closing = False
        # Set at a shutdown that leaves durable calls running (TETHER_ON_SHUTDOWN=detach).
        self.detaching = False

    async def run(
        self, inv: Invocation, tool: Tool, ask: Ask | None, observer: CallObserver | None
    ) -> CallOutcome:
        """Run one call to its end (or until it is offloaded) and say what the model sees."""
        try:
            return await self._run(inv, tool, ask, observer)
        except asyncio.CancelledError:
            # The turn was stopped, perhaps before the tool even started: never leave the
            # call registered as running.
            call = self._index.by_id(inv.call_id)
            if call is not None and not call.finished.is_set() and not self.leaves(call):
                reason = call.stop_reason or model_texts.TASK_STOPPED
                await asyncio.shield(self.stop_and_finish(call, reason, observer))
            raise

    async def _run(
        self, inv: Invocation, tool: Tool, ask: Ask | None, observer: CallObserver | None
    ) -> CallOutcome:
        call = await self._recorder.register(inv, tool, "awaiting_approval" if ask else "running")
        if observer:
            observer.started(live_info(call))
        if ask is not None:
            try:
                admission = await self._await_admission(call, ask)
                if not admission.allowed:
                    return await self._recorder.finish(call, "denied", admission.reason, observer)
                call.human_approved = admission.by_human
                await self._recorder.transition(call, "running")
            except Exception as exc:
                # The wait or its record failed (the store refused a write: a full
                # disk). The call never runs; it ends here, not listed as awaiting
                # approval for good, and the turn fails on the error.
                await self._recorder.finish(call, "error", model_texts.not_run(str(exc)), observer)
                raise
        return await self._execute(call, tool, observer)

    async def record_denied(self, inv: Invocation, reason: str) -> CallOutcome:
        """Record a call policy refused outright; it never runs."""
        call = await self._recorder.register(inv, None, "awaiting_approval")
        return await self._recorder.finish(call, "denied", reason, None)

    async def _await_admission(self, call: LiveCall, ask: Ask) -> Admission:
        waiting = asyncio.ensure_future(ask())
        call.work = waiting
        try:
            return await waiting
        except asyncio.CancelledError:
            if call.stop_reason is None:
                raise
            reason = model_texts.cancelled_before_approval(call.stop_reason)
            return Admission(False, reason, decided_by="cancel")

    async def _execute(
        self, call: LiveCall, tool: Tool, observer: CallObserver | None
    ) -> CallOutcome:
        if call.stop_reason is not None:  # stopped while it was being set up
            return await self._recorder.finish(call, "cancelled", call.stop_reason, observer)
        ctx = self._context(call, observer)
        call.work = asyncio.ensure_future(tool.run(call.invocation.arguments, ctx))
        watcher = self._tasks.spawn(self._actions.watch_deadlines(call))
        flusher = self._tasks.spawn(self._recorder.flush_output(call))
        try:
            await _until_done_or_released(call)
        except asyncio.CancelledError:
            # The turn was stopped: stop the call too and record it, then let the
            # cancellation go on.
            if self.leaves(call):
                raise  # it runs on; the next start adopts it
            reason = "server shutdown" if self.closing else model_texts.TASK_STOPPED
            await asyncio.shield(self.stop_and_finish(call, reason, observer))
            raise
        return await self._settle(call, observer, watcher, flusher)

    async def _settle(
        self,
        call: LiveCall,
        observer: CallObserver | None,
        watcher: asyncio.Task[Any],
        flusher: asyncio.Task[Any],
    ) -> CallOutcome:
        """What the turn waiting on the call gets once its work ended or it was moved to
        the background: its result, or word that it runs on in the background."""
        assert call.work is not None
        if not call.work.done():
            self._tasks.spawn(self._finish_in_background(call, observer, watcher, flusher))
            return CallOutcome(end_state=None, offloaded=True, model_text=describe_offload(call))
        # The turn takes the result itself: a move to the background asked as the tool
        # returned (its write under way meanwhile) did not happen, whatever it stored.
        call.offload_reason = None
        return await self._conclude(call, observer, watcher, flusher)

    def leaves(self, call: LiveCall) -> bool:
        """Whether a shutdown leaves this call as it is: running (its tree outlives us,
        the next start adopts it), or awaiting approval (the next start denies it, as
        after a crash: the server restarted before anyone answered)."""
        if not self.detaching or call.stop_reason is not None:
            return False
        return call.process is not None or call.status == "awaiting_approval"

    def _context(self, call: LiveCall, observer: CallObserver | None) -> ToolContext:
        return ToolContext(
            call, self._workspace, self._protected, observer, self._launcher.start, self._launched
        )

    def _launched(self, call: LiveCall) -> None:
        self._tasks.spawn(self._recorder.record_process(call))
        if call.stop_reason is not None and not call.signalled:
            # A stop arrived while the tree was starting, when there was none to signal.
            self._tasks.spawn(self._actions.stop([call], call.stop_reason, call.force_cancelled))

    def adopt(self, call: LiveCall, work: Awaitable[ToolResult]) -> asyncio.Task[Any]:
        """Carry a revived call (see CallRecorder.revive) to its end, as if this server
        had started it: its deadlines, its output saved, its end recorded once. A call
        that was in the background delivers its result as such; the returned task gives
        the outcome of one a turn was waiting on."""
        call.work = asyncio.ensure_future(work)
        watcher = self._tasks.spawn(self._actions.watch_deadlines(call))
        flusher = self._tasks.spawn(self._recorder.flush_output(call))
        if call.status == "offloaded":
            return self._tasks.spawn(self._finish_in_background(call, None, watcher, flusher))
        return self._tasks.spawn(self._conclude_when_done(call, watcher, flusher))

    async def _conclude_when_done(
        self, call: LiveCall, watcher: asyncio.Task[Any], flusher: asyncio.Task[Any]
    ) -> CallOutcome:
        # A resumed turn waits on this, so a move to the background lets it go on, as
        # for a call this server started (the move was answered 202 and did nothing).
        # The wait never raises the work's error; what it may raise is our own
        # cancellation (a detaching shutdown), which must end this task, not conclude a
        # call whose work has not ended (work.exception() would raise InvalidStateError).
        await _until_done_or_released(call)
        return await self._settle(call, None, watcher, flusher)

    async def _conclude(
        self,
        call: LiveCall,
        observer: CallObserver | None,
        watcher: asyncio.Task[Any],
        flusher: asyncio.Task[Any],
    ) -> CallOutcome:
        assert call.work is not None
        if call.process is not None:
            call.end_cause = call.process.end_cause()
        end_state, summary = _end_of(call, call.work)
        watcher.cancel()
        outcome = await self._recorder.finish(call, end_state, summary, observer)
        await flusher
        if _lost(call.work):
            return dataclasses.replace(outcome, lost=summary)
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
        await self.deliver_in_background(call.session_id, call.call_id, outcome.model_text)

    async def deliver_in_background(self, session_id: str, call_id: str, text: str) -> None:
        """Hand a call's result to its session as a background result."""
        if self.on_background_result is None:
            log.error("the background result of %s has no receiver", call_id)
            return
        try:
            await self.on_background_result(session_id, call_id, text)
        except Exception:
            log.exception("delivering the background result of %s failed", call_id)

    async def stop_and_finish(
        self, call: LiveCall, reason: str, observer: CallObserver | None
    ) -> None:
        """Stop the call, wait for its tool to return, and record it as cancelled."""
        await self._actions.stop([call], reason, force=False)
        if call.work is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait({call.work})
        if not call.finished.is_set():
            await self._recorder.finish(call, "cancelled", reason, observer)


async def _until_done_or_released(call: LiveCall) -> None:
    """Wait until the call's work ends or the call is moved to the background."""
    assert call.work is not None
    released = asyncio.create_task(call.released.wait())
    try:
        await asyncio.wait({call.work, released}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        released.cancel()


def _lost(work: asyncio.Task[Any]) -> bool:
    return not work.cancelled() and isinstance(work.exception(), ResultLost)


def _end_of(call: LiveCall, work: asyncio.Task[Any]) -> tuple[EndState, str]:
    """The end state of a call whose work finished, and a one-line summary. What the
    launcher saw ends the question where it can tell: a command that exited by itself
    just as a stop was sent keeps its own result (a success reported as cancelled would
    be run again), and one its launcher stopped at the deadline timed out even when the
    coordinator's own timer had not fired yet."""
    if call.end_cause == "deadline" or (call.timed_out and call.end_cause != "itself"):
        return "timeout", "timed out and was killed"
    if call.stop_reason is not None and call.end_cause != "itself":
        return "cancelled", call.stop_reason
    if work.cancelled():
        return "cancelled", "cancelled"
    exc = work.exception()
    if isinstance(exc, (ToolInputError, ResultLost)):
        return "error", str(exc)
    if exc is not None:
        log.error("tool %s failed", call.invocation.tool_name, exc_info=exc)
        return "error", f"{type(exc).__name__}: {exc}"
    result: ToolResult = work.result()
    return ("error" if result.is_error else "success"), result.summary
