"""Chat tasks: each runs one agent turn in the background, one turn per session at a time."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Sequence
from typing import Any

from tether.agent.ports import ATTENDED, WHEN_UNATTENDED, Attendance, WhenUnattended
from tether.agent.turn import Agent, ModelError, StepLimitReached, TurnEndedElsewhere, TurnRequest
from tether.elsewhere import Elsewhere, unreachable
from tether.errors import OutOfStorage
from tether.keeper.adoption import Adoption
from tether.model_texts import TASK_STOPPED
from tether.store.records import TaskRecord
from tether.store.store import Store
from tether.store.until_stored import until_stored
from tether.tasks import resume
from tether.tasks.finished import finished_event, record_finished_event
from tether.tasks.runs import Running, TaskNotFound, TaskView, TooManyTasks, new_task_id
from tether.tasks.session_turns import SessionTurns
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.webhooks.events import Notify, ignore

log = logging.getLogger(__name__)

#: Seconds an exiting server gives a task whose turn is over to store its result.
RESULT_AT_EXIT = 5.0

INTERNAL_ERROR = "the turn failed on an internal error; the server log has the details"

RESTARTED = "server restarted"
# Of a finished task's answer, this much goes into its task.finished notification.
# Run before a resumed turn; a result it returns ends the task instead of the turn.
Prepare = Callable[["Running"], Awaitable[dict[str, Any] | None]]


class TaskService:
    def __init__(
        self,
        store: Store,
        agent: Agent,
        coordinator: ToolCallCoordinator,
        default_level: str,
        max_tasks: int,
        *,
        when_unattended: WhenUnattended | None = None,
        notify: Notify = ignore,
        turns: SessionTurns | None = None,
        elsewhere: Elsewhere | None = None,
    ) -> None:
        self._store = store
        self._turns = turns or SessionTurns()
        # Other nodes (a cluster): a task another node runs is stopped there; without
        # them (no Redis) such a stop is refused.
        self._elsewhere = elsewhere
        self._when_unattended = when_unattended
        self._notify = notify
        self._agent = agent
        self._coordinator = coordinator
        self._default_level = default_level
        self._max_tasks = max_tasks
        self._running: dict[str, Running] = {}
        # Sessions a wake-up is being submitted for (the check and the submit await).
        self._waking: set[str] = set()

    async def submit(
        self,
        session_id: str,
        user_id: str,
        channel: str,
        texts: Sequence[str],
        level: str | None,
        trigger: str = "user",
        time_limit: float | None = None,
        *,
        attended: bool = False,
        when_unattended: WhenUnattended | None = None,
    ) -> str:
        """Persist the user's messages, record the task and start it; returns its id.

        ``attended``: someone follows the turn's stream. ``when_unattended`` overrides the
        session's and the server's policy for an unattended turn (a cron job sets it). A
        task still running ``time_limit`` seconds after it started is stopped and fails.
        """
        run = self._take_slot(
            Running(new_task_id(), session_id, trigger, attended, when_unattended)
        )
        try:
            title = texts[0][:80] if texts else None
            # The user's words are saved before the model is called: a crash cannot lose
            # them. Session, task and words are one transaction.
            await self._store.tasks.open_in_session(
                run.task_id,
                (session_id, user_id, channel, title),
                trigger,
                level,
                [("user", {"role": "user", "content": t}) for t in texts],
                when_unattended,
            )
        except BaseException:
            self._running.pop(run.task_id, None)
            raise
        run.job = asyncio.create_task(self._run(run, level, time_limit))
        return run.task_id

    def _take_slot(self, run: Running) -> Running:
        """Check the task limit and take a place under it in one step.

        No await may come between the check and the take: a burst of requests would all
        pass the check before any of them registered.
        """
        if len(self._running) >= self._max_tasks:
            raise TooManyTasks(f"{self._max_tasks} tasks are already running; try again later")
        self._running[run.task_id] = run
        return run

    async def resolve_level(self, session_id: str, level: str | None) -> str:
        """The approval level in force: the request's, else the session's, else the default."""
        if level:
            return level
        session = await self._store.chats.get_session(session_id)
        if session is not None and session.approval_level:
            return session.approval_level
        return self._default_level

    async def _run(
        self,
        run: Running,
        level: str | None,
        time_limit: float | None = None,
        prepare: Prepare | None = None,
    ) -> None:
        try:
            try:
                async with self._turns.hold(run.session_id, run.task_id):
                    early = None if prepare is None else await prepare(run)
                    result = early or await self._turn_within(run, level, time_limit)
            except asyncio.CancelledError:
                # Stopped while waiting for the session or in the middle of the turn.
                if run.stop_reason is None:
                    raise
                result = {"status": "cancelled", "error": run.stop_reason}
            run.turn_over.set()
            recorded = await until_stored(
                functools.partial(self._store.tasks.finish, run.task_id, result),
                f"the result of task {run.task_id}",
            )
            run.feed.emit({"type": "final", "task_id": run.task_id, "result": result})
            if recorded:
                # Not told again of a task whose end another node recorded first (and
                # told): a survivor that failed it as "node lost".
                event = finished_event(run.task_id, run.session_id, run.trigger, result)
                self._notify("task.finished", event)
        finally:
            run.turn_over.set()
            run.feed.close()
            self._running.pop(run.task_id, None)
        await self._wake_if_pending(run.session_id)

    async def _attendance(self, run: Running) -> Attendance:
        if run.attended:
            return ATTENDED
        session = await self._store.chats.get_session(run.session_id)
        stored = session.when_unattended if session is not None else None
        policy = (
            run.when_unattended
            or (stored if stored in WHEN_UNATTENDED else None)
            or self._when_unattended
            # Nobody answers a cron run's question: by default it is refused at once.
            or ("deny" if run.trigger == "cron" else "wait")
        )
        return Attendance(attended=False, when_unattended=policy)

    async def _turn_within(
        self, run: Running, level: str | None, time_limit: float | None
    ) -> dict[str, Any]:
        try:
            async with asyncio.timeout(time_limit):
                return await self._turn(run, level)
        except TimeoutError:
            error = f"the task exceeded its timeout of {time_limit:g} s"
            # The turn's own calls ended with it; the ones it left in the background too.
            await self._coordinator.stop_task(run.task_id, error)
            return {"status": "failed", "error": error}

    async def _turn(self, run: Running, level: str | None) -> dict[str, Any]:
        await self._store.tasks.mark_running(run.task_id)
        if run.trigger == "background_result" and not await self._store.deliveries.pending(
            run.session_id
        ):
            # The turn that held the session meanwhile (on another node, say) took the
            # results this one was woken for: there is nothing to tell the model.
            return {"status": "completed", "text": "", "steps": 0}
        run.feed.emit({"type": "task_started", "task_id": run.task_id})
        req = TurnRequest(
            run.session_id,
            run.task_id,
            await self.resolve_level(run.session_id, level),
            await self._attendance(run),
        )
        try:
            outcome = await self._agent.run_turn(req, run.feed)
        except (ModelError, StepLimitReached, TurnEndedElsewhere, OutOfStorage) as exc:
            log.warning("task %s failed: %s", run.task_id, exc)
            return {"status": "failed", "error": str(exc)}
        except Exception:
            # A bug's own words (a NoneType, a traceback) mean nothing to the person
            # chatting; the log keeps them.
            log.exception("task %s failed on an internal error", run.task_id)
            return {"status": "failed", "error": INTERNAL_ERROR}
        result: dict[str, Any] = {
            "status": "completed",
            "text": outcome.text,
            "steps": outcome.steps,
        }
        if outcome.refused:
            result["refusal"] = True
        return result

    async def get(self, task_id: str) -> TaskView:
        """The task and the messages it produced. Raises TaskNotFound."""
        record = await self._store.tasks.get(task_id)
        if record is None:
            raise TaskNotFound(task_id)
        messages = [m.payload for m in await self._store.chats.task_messages(task_id)]
        return TaskView(record, messages)

    async def stop(self, task_id: str, reason: str = TASK_STOPPED) -> bool:
        """Stop a task and its tool calls, ``reason`` saying why (recorded on the task and
        on its calls); False if it had already finished.

        Raises TaskNotFound."""
        run = self._running.get(task_id)
        if run is None:
            record = await self._store.tasks.get(task_id)
            if record is None:
                raise TaskNotFound(task_id)
            return await self._stop_elsewhere(record, reason)
        # Cancel the turn first: its calls in flight are stopped and recorded on the way
        # out, and it cannot slip in another model step. Then stop what it left running
        # in the background. Only the first stop cancels it: a second cancel cut the
        # task's stopping short, its end unrecorded (it read "running" for good).
        if run.stop_reason is None:
            run.stop_reason = reason
            if run.job is not None:
                run.job.cancel()
        await self._coordinator.stop_task(task_id, run.stop_reason)
        # Its turn, not the storing of its result: on a full disk that waits for room.
        await run.until_turn_over()
        return True

    async def wait(self, task_id: str) -> dict[str, Any] | None:
        """Wait until the task has ended and return its result.

        None if the task is unknown or ended without a result (the server stopped it).
        Cancelling the waiter leaves the task running.
        """
        run = self._running.get(task_id)
        if run is not None and run.job is not None:
            # asyncio.wait neither raises the job's exception nor cancels the job.
            await asyncio.wait({run.job})
        record = await self._store.tasks.get(task_id)
        return record.result if record is not None else None

    async def stop_session(self, session_id: str) -> bool:
        """Stop every running turn of the session; False if none was running.
        Unavailable, nothing stopped, if another node runs one and this node cannot
        reach it (no Redis)."""
        others = await self._others_in(session_id)
        if others and self._elsewhere is None:
            raise unreachable(f"task {others[0].id}")
        task_ids = [r.task_id for r in list(self._running.values()) if r.session_id == session_id]
        for task_id in task_ids:
            await self.stop(task_id)
        stopped = [await self._stop_elsewhere(t) for t in others]
        return bool(task_ids) or any(stopped)

    async def _others_in(self, session_id: str) -> list[TaskRecord]:
        """The session's unfinished tasks another node runs (read from the store only
        where there may be other nodes: this server's store has an owner)."""
        if self._store.owner is None:
            return []
        records = await self._store.tasks.list_for_session(session_id)
        return [r for r in records if self._is_elsewhere(r)]

    def _is_elsewhere(self, record: TaskRecord) -> bool:
        """Whether another node runs the task: it is unfinished, does not run here, and
        its owner is another server's. A task an earlier run of this server left is no
        longer such a row once this one has started: recovery resumed it (as this
        server's) or ended it."""
        mine = self._store.owner.id if self._store.owner is not None else None
        return (
            record.status != "finished"
            and record.id not in self._running
            and record.owner not in (None, mine)
        )

    async def _stop_elsewhere(self, record: TaskRecord, reason: str = TASK_STOPPED) -> bool:
        """Stop a task another node runs, there; False if it has ended (or is ours).
        Unavailable, nothing changed, if this node cannot reach the other (no Redis)."""
        if not self._is_elsewhere(record):
            return False
        assert record.owner is not None
        if self._elsewhere is None:
            raise unreachable(f"task {record.id}")
        args = {"task_id": record.id, "reason": reason}
        return bool(await self._elsewhere.ask(record.owner, "task.stop", args, f"task {record.id}"))

    def follow(
        self, task_id: str, until: asyncio.Event | None = None
    ) -> AsyncGenerator[list[dict[str, Any]]] | None:
        """The running task's events (EventFeed.follow, ending once ``until`` is set,
        after what was emitted by then); None if it does not run here."""
        run = self._running.get(task_id)
        return run.feed.follow(until) if run else None

    def running_count(self) -> int:
        """How many tasks are running on this node."""
        return len(self._running)

    def running_ids(self) -> list[str]:
        return list(self._running)

    async def busy_sessions(self) -> set[str]:
        """Sessions a turn is running (or waiting to run) in, on this node and, in a
        cluster, on every node."""
        here = {r.session_id for r in self._running.values()}
        if self._elsewhere is None:
            return here
        return here | await self._store.tasks.unfinished_sessions()

    def session_busy(self, session_id: str) -> bool:
        return any(r.session_id == session_id for r in self._running.values())

    async def on_background_result(self, session_id: str, call_id: str, text: str) -> None:
        """A background call ended: queue its result and wake the session if idle."""
        await self._store.deliveries.add(session_id, call_id, text)
        await self._wake_if_pending(session_id)

    async def _wake_if_pending(self, session_id: str) -> None:
        if session_id in self._waking or self.session_busy(session_id):
            return  # the running (or starting) turn takes it at its next step
        # Two results ending together must wake the session once, not start two turns.
        self._waking.add(session_id)
        try:
            if not await self._store.deliveries.pending(session_id):
                return
            session = await self._store.chats.get_session(session_id)
            if session is None:
                return
            with contextlib.suppress(TooManyTasks):
                await self.submit(
                    session_id, session.user_id, session.channel, [], None, "background_result"
                )
        finally:
            self._waking.discard(session_id)

    async def recover(
        self, dead_owners: Collection[str | None], adoption: Adoption | None = None
    ) -> None:
        """After a restart: of the tasks servers that are gone left (``dead_owners``),
        those whose calls were adopted (``adoption``, with the keeper) are taken up
        again, the rest fail; waiting results get delivered. A live server's tasks are
        not touched."""
        if adoption is not None:
            await self._resume_all(dead_owners, adoption)
        failed = await self._store.tasks.fail_unfinished(
            RESTARTED, dead_owners, keep=set(self._running)
        )
        for record in failed:
            self._notify("task.finished", record_finished_event(record))
        if failed:
            log.info("marked %d unfinished task(s) failed (%s)", len(failed), RESTARTED)
        for session_id in await self._store.deliveries.sessions_with_pending():
            await self._wake_if_pending(session_id)

    async def shutdown(self, detach: bool = False) -> None:
        """Stop every running task (their calls are recorded as cancelled); with
        ``detach``, leave each recorded as unfinished, for the next start to resume."""
        runs = list(self._running.values())
        for run in runs:
            if run.stop_reason is not None:
                continue  # being stopped already: cancelled again, its end would be lost
            if not detach:
                run.stop_reason = "server shutdown"
            if run.job is not None:
                run.job.cancel()
        for run in runs:
            await self._settle(run)

    async def _settle(self, run: Running) -> None:
        """At an exit: wait for the task's turn to end, then a while for its result to
        be stored. One the store will not take (a full disk) is left unfinished; the
        next start's recovery ends it."""
        if run.job is None:
            return
        await run.until_turn_over()
        done, _ = await asyncio.wait({run.job}, timeout=RESULT_AT_EXIT)
        if not done:
            log.warning(
                "the result of task %s could not be stored before the exit; the next start ends it",
                run.task_id,
            )
            run.job.cancel()
        with contextlib.suppress(BaseException):
            await run.job

    async def _resume_all(self, dead_owners: Collection[str | None], adoption: Adoption) -> None:
        """Take up each task dead owners left unfinished: after its adopted calls end, their
        results follow the assistant message that asked for them and the model is called
        again. A task that lost a call fails saying what was lost; a turn that was
        inside a model request is retried once."""
        for task in await self._store.tasks.unfinished(dead_owners):
            problem = adoption.lost_problem(task.id)
            if problem is not None:
                await self._store.tasks.finish(task.id, {"status": "failed", "error": problem})
                continue
            calls = await self._store.tool_calls.list_for_task(task.id)
            waits = {c.id: adoption.waiting[c.id] for c in calls if c.id in adoption.waiting}
            if task.resumes >= 1 and not waits:
                continue  # retried once already: it fails with the rest
            await self._store.tasks.count_resume(task.id)
            # The policy it was started with (a cron job's) holds after the restart too.
            policy = task.when_unattended if task.when_unattended in WHEN_UNATTENDED else None
            run = Running(task.id, task.session_id, task.trigger, when_unattended=policy)
            self._running[task.id] = run

            async def answer_open_calls(
                run: Running, waits: dict[str, Any] = waits
            ) -> dict[str, Any] | None:
                # Shielded: stopping the task cancels this wait, and a task awaited
                # bare is cancelled with its waiter: the adopted call it was waiting on
                # would never be concluded (it stayed listed running for ever).
                outcomes = {cid: await asyncio.shield(t) for cid, t in waits.items()}
                try:
                    await self._answer_open_calls(
                        run, {cid: o.model_text for cid, o in outcomes.items()}
                    )
                except TurnEndedElsewhere as exc:
                    return {"status": "failed", "error": str(exc)}
                # A call lost after its adoption (its files turned out corrupt, its
                # runner died) fails the task, as one lost at adoption does.
                lost = [o.lost for o in outcomes.values() if o.lost]
                return {"status": "failed", "error": "; ".join(lost)} if lost else None

            run.job = asyncio.create_task(
                self._run(run, task.approval_level, prepare=answer_open_calls)
            )
            log.info("resuming task %s after the restart (%d call(s) adopted)", task.id, len(waits))

    async def _answer_open_calls(self, run: Running, outcomes: dict[str, str]) -> None:
        """Persist a result for each call the task's last assistant message asked for.
        TurnEndedElsewhere, and nothing stored, if another node ended the task meanwhile
        (this node declared lost while its adopted calls ran), as for any write of a turn."""
        messages = [m.payload for m in await self._store.chats.task_messages(run.task_id)]
        asked = resume.open_calls(messages)
        if not asked:
            return
        records = await self._store.tool_calls.list_for_task(run.task_id)
        answers = resume.answers(asked, records, outcomes)
        entries = [("tool", a) for a in answers]
        if not await self._store.chats.append_to_turn(run.session_id, run.task_id, entries):
            raise TurnEndedElsewhere.of(run.task_id)
        for answer in answers:
            run.feed.emit({"type": "message", "kind": "tool", "message": answer})
