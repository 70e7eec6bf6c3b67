"""What acts on a call while it runs: cancel, offload, extend, and its deadlines firing.

Every stop (a person's cancel, a deadline, a stopped task, shutdown) goes through
:meth:`CallActions.stop`, which hands the process trees to the launcher.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from tether import model_texts
from tether.toolcalls import deadlines as dl
from tether.toolcalls.call import CallInfo
from tether.toolcalls.errors import ToolCallConflict
from tether.toolcalls.index import CallIndex
from tether.toolcalls.launcher import LaunchedProcess, Launcher
from tether.toolcalls.live_call import LiveCall, live_info
from tether.toolcalls.owned_tasks import OwnedTasks
from tether.toolcalls.recorder import CallRecorder
from tether.toolcalls.state import TransitionError, is_active
from tether.waits import event_within

log = logging.getLogger(__name__)


class CallActions:
    """Cancel, offload and extend live calls; stop them for any reason."""

    def __init__(
        self,
        index: CallIndex,
        recorder: CallRecorder,
        launcher: Launcher,
        tasks: OwnedTasks,
        cancel_grace: float,
    ) -> None:
        self._index = index
        self._recorder = recorder
        self._launcher = launcher
        self._tasks = tasks
        self._grace = cancel_grace

    async def cancel(self, session_id: str, call_id: str, force: bool) -> None:
        """Stop a call: SIGTERM to its process tree then SIGKILL, or SIGKILL at once.

        Returns once the stop is under way; the call's end is recorded when it stops."""
        call = await self._index.require_live(session_id, call_id)
        self._tasks.spawn(self.stop([call], model_texts.USER_CANCEL_REASON, force=force))

    async def offload(self, session_id: str, call_id: str) -> CallInfo:
        """Move a running call to the background; the model carries on without it."""
        call = await self._index.require_live(session_id, call_id)
        _require_offloadable(call)
        if call.status != "running":
            raise ToolCallConflict(
                f"only a running call can be offloaded; this one is {call.status}"
            )
        if call.ending.locked():
            raise ToolCallConflict("the call has ended; its result goes to the turn")
        if call.stop_reason is not None:
            raise ToolCallConflict(
                f"the call is being stopped ({call.stop_reason}); its end goes to the turn"
            )
        await self.offload_call(call, "user")
        return live_info(call)

    async def offload_call(self, call: LiveCall, reason: str) -> None:
        """Move ``call`` to the background, unless it has already moved or ended, or is
        ending (its end being recorded, or its tree stopped): the turn, told it still
        runs, would get word of that end next."""
        if call.ending.locked() or call.stop_reason is not None:
            return
        before, call.offload_reason = call.offload_reason, reason
        try:
            await self._recorder.transition(call, "offloaded")
        except TransitionError:
            return
        except Exception:
            call.offload_reason = before  # refused (a full disk): it stays where it was
            raise
        call.released.set()

    async def extend(
        self, session_id: str, call_id: str, target: dl.DeadlineTarget, seconds: float | None
    ) -> CallInfo:
        """Move the kill or offload deadline later, or remove it (``seconds=None``)."""
        call = await self._index.require_live(session_id, call_id)
        if not is_active(call.status):
            raise ToolCallConflict(f"deadlines apply to running calls; this one is {call.status}")
        if call.timed_out or call.stop_reason is not None:
            # Its tree is being stopped (its kill deadline fired, or a cancel): a later
            # deadline would not save it, and was answered 202 as if it had.
            why = "its kill deadline passed" if call.timed_out else call.stop_reason
            raise ToolCallConflict(f"the call is being stopped ({why}); it cannot be extended")
        if target == "offload" and call.status == "offloaded":
            raise ToolCallConflict("the call is already in the background")
        if target == "offload":
            _require_offloadable(call)
        before = call.deadlines
        try:
            call.deadlines = extended = dl.extend(before, target, seconds, time.monotonic())
        except dl.DeadlineError as exc:
            raise ToolCallConflict(str(exc)) from exc
        call.deadline_changed.set()
        try:
            await self._recorder.store_deadlines(call)
        except Exception:
            # Refused (a full disk: a 507, "nothing of this write was kept"): the call
            # keeps the deadlines it had, here as in the runner, which was not told.
            if call.deadlines is extended:
                call.deadlines = before
                call.deadline_changed.set()
            raise
        if target == "kill" and call.process is not None:
            _, kill_after = call.deadlines.remaining(time.monotonic())
            await call.process.set_kill_deadline(kill_after)
        return live_info(call)

    async def stop(self, calls: list[LiveCall], reason: str, force: bool) -> None:
        """Stop calls together (one launcher pass for all their trees).

        A call with no process yet has its tool cancelled; one whose process appears
        later is stopped then (see ToolContext.launch). The first reason stands; ``force``
        upgrades a graceful stop already under way.
        """
        trees: list[LaunchedProcess] = []
        for call in calls:
            if call.finished.is_set() or call.ending.locked():
                # Ended, or its end being recorded (decided from how its tool returned):
                # marking it stopped now recorded a success as force-cancelled.
                continue
            if call.stop_reason is None or force:
                call.stop_reason = call.stop_reason or reason
                call.force_cancelled = call.force_cancelled or force
            if call.process is None:
                if call.work is not None:
                    call.work.cancel()
                continue
            # A graceful stop already under way ends in SIGKILL after the grace period;
            # asking again (the task stopped too, say) needs no second pass.
            if call.signalled and not force:
                continue
            call.signalled = True
            trees.append(call.process)
        if trees:
            await self._launcher.stop(trees, self._grace, force)

    async def stop_task(self, task_id: str, reason: str) -> None:
        """Stop every call a task started, including ones in the background."""
        await self.stop(self._index.of_task(task_id), reason, force=False)

    async def watch_deadlines(self, call: LiveCall) -> None:
        """Carry out the call's deadlines as they come: offload, then kill."""
        while is_active(call.status):
            due = call.deadlines.next_due()
            delay = None if due is None else max(0.0, due - time.monotonic())
            if await event_within(call.deadline_changed, delay):
                call.deadline_changed.clear()
                continue
            now = time.monotonic()
            kill_at, offload_at = call.deadlines.kill_at, call.deadlines.offload_at
            if kill_at is not None and now >= kill_at:
                call.timed_out = True
                await self.stop([call], "its deadline passed", force=False)
                return
            if offload_at is not None and now >= offload_at:
                call.deadlines = replace(call.deadlines, offload_at=None)
                if call.status == "running":
                    await self._offload_when_due(call)

    async def _offload_when_due(self, call: LiveCall) -> None:
        """The offload deadline's move to the background. One the store refuses (a full
        disk) leaves the call in the foreground, its turn waiting on it; the watch goes
        on, so its kill deadline still holds."""
        try:
            await self.offload_call(call, "deadline")
        except Exception:
            log.exception(
                "moving call %s to the background at its deadline failed; it stays in "
                "the foreground",
                call.call_id,
            )


def _require_offloadable(call: LiveCall) -> None:
    if not call.invocation.offloadable:
        raise ToolCallConflict(
            "this call was made over /mcp by a client that waits on its request for the "
            "result, so it cannot be moved to the background (cancel it, or extend its "
            "kill deadline)"
        )
