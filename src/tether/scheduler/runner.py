"""Executing one cron run: a chat turn in the job's session, or a posted text."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from tether.errors import TetherError
from tether.scheduler.job_parts import KNOWN_CHANNELS
from tether.scheduler.models import JobSpec
from tether.store.chats import ChatRepository
from tether.store.cron import CronRepository
from tether.store.toolcalls import ToolCallRepository
from tether.store.until_stored import StoreLater
from tether.waits import within
from tether.webhooks.events import Notify, ignore

log = logging.getLogger(__name__)

#: How a `text` task appears in the session: an assistant message, so the console shows
#: it as Tether speaking and the model later sees it as something it already said
#: (a user-role notification would read to the model as a request to act on).
TEXT_MESSAGE_KIND = "assistant"
SHUTDOWN_ERROR = "the server stopped during the run"


class TaskPort(Protocol):
    """The part of :class:`tether.tasks.service.TaskService` a run needs."""

    async def submit(
        self,
        session_id: str,
        user_id: str,
        channel: str,
        texts: Sequence[str],
        level: str | None,
        trigger: str = "user",
        *,
        attended: bool = False,
        when_unattended: Literal["deny", "wait"] | None = None,
    ) -> str: ...

    async def wait(self, task_id: str) -> dict[str, Any] | None: ...

    async def stop(self, task_id: str, reason: str = ...) -> bool: ...


def unknown_channel(spec: JobSpec) -> str | None:
    """Why a run cannot be delivered, if its channel is not one Tether has."""
    channel = spec.dispatch.channel if spec.dispatch is not None else KNOWN_CHANNELS[0]
    if channel in KNOWN_CHANNELS:
        return None
    known = ", ".join(KNOWN_CHANNELS)
    return f"dispatch channel {channel!r} is not available in Tether (it has: {known})"


def outcome_of(result: dict[str, Any] | None) -> tuple[str, str | None]:
    """Map a chat task's result to a run (status, error)."""
    if result is None:
        return "error", "the task ended without a result"
    status = result.get("status")
    if status == "completed":
        return "success", None
    if status == "cancelled":
        return "error", str(result.get("error") or "the task was cancelled")
    return "error", str(result.get("error") or f"the task ended with status {status!r}")


@dataclass(frozen=True)
class ResumedRun:
    """A run whose turn a restart took up again: its task, and when the run began."""

    task_id: str
    started_at: float


class RunExecutor:
    """Carries a recorded run through to its end state."""

    def __init__(
        self,
        runs: CronRepository,
        chats: ChatRepository,
        calls: ToolCallRepository,
        tasks: TaskPort,
        clock: Callable[[], datetime],
        notify: Notify = ignore,
    ) -> None:
        self._notify = notify
        self._runs = runs
        self._chats = chats
        self._calls = calls
        self._tasks = tasks
        self._clock = clock
        #: Set by a shutdown that leaves turns running (see CronScheduler.shutdown).
        self.detaching = False
        #: Runs' ends the store refused (a full disk), tried again until it takes them:
        #: till then the run reads ``running`` and its job busy.
        self.ends = StoreLater()

    async def stop_turn(self, task_id: str) -> None:
        """Stop a run's turn wherever it runs; a turn already gone, or a server that
        does not answer (its loss ends its runs), is logged and left."""
        try:
            await self._tasks.stop(task_id)
        except TetherError as exc:
            log.warning("stopping cron turn %s failed: %s", task_id, exc)

    async def execute(self, spec: JobSpec, run_id: str, resumed: ResumedRun | None = None) -> None:
        """Perform the run and record how it ended (also when it is cancelled).

        ``resumed``: a run whose turn a restart took up again; it is followed to its end
        within what is left of its timeout, counted from the run's start."""
        task_ids: list[str] = []
        if resumed is None and await self._runs.get_run(run_id) is None:
            # Its job was deleted between the tick's claim and this start.
            log.info("cron run %s of job %s is not started: the job is gone", run_id, spec.id)
            return
        try:
            if resumed is None:
                status, error = await self._perform(spec, run_id, task_ids)
            else:
                task_ids.append(resumed.task_id)
                left = resumed.started_at + spec.runtime.timeout_seconds
                left -= self._clock().timestamp()
                status, error = await self._conclude(spec, resumed.task_id, left)
        except asyncio.CancelledError:
            if self.detaching and task_ids:
                raise  # left in progress with its turn, for the next start to follow
            # Shutdown or job deletion: the turn must not outlive its run.
            for task_id in task_ids:
                await self._tasks.stop(task_id)
            await self._finish(run_id, "error", SHUTDOWN_ERROR)
            raise
        except Exception as exc:
            log.warning("cron run %s of job %s failed: %s", run_id, spec.id, exc)
            status, error = "error", str(exc) or type(exc).__name__
        failed = status != "success"
        await self._finish(run_id, status, error, spec.id or "" if failed else None)

    def tell_failed(self, job_id: str, run_id: str, status: str, error: str | None) -> None:
        """Notify (webhooks) that a run ended other than ``success``."""
        self._notify("cron.run_failed", run_failed_event(job_id, run_id, status, error))

    async def _perform(
        self, spec: JobSpec, run_id: str, task_ids: list[str]
    ) -> tuple[str, str | None]:
        problem = unknown_channel(spec)
        if problem is not None:
            return "error", problem
        target = spec.target
        session_id = target.session_id
        channel = spec.dispatch.channel if spec.dispatch is not None else KNOWN_CHANNELS[0]
        if spec.task_type == "text":
            await self._chats.ensure_session(session_id, target.user_id, channel, spec.name)
            payload = {"role": "assistant", "content": spec.text}
            await self._chats.append(session_id, None, [(TEXT_MESSAGE_KIND, payload)])
            return "success", None
        assert spec.request is not None  # the model guarantees it for agent jobs
        task_id = await self._tasks.submit(
            session_id,
            target.user_id,
            channel,
            [spec.request.prompt()],
            spec.approval_level,
            trigger="cron",
            when_unattended=spec.when_unattended,
        )
        task_ids.append(task_id)
        await self._runs.set_run_task(run_id, task_id)
        return await self._conclude(spec, task_id, spec.runtime.timeout_seconds)

    async def _conclude(self, spec: JobSpec, task_id: str, left: float) -> tuple[str, str | None]:
        """Wait (at most ``left`` seconds) for the run's turn to end; its outcome."""
        try:
            result = await within(self._tasks.wait(task_id), max(0.0, left))
        except TimeoutError:
            # Stopping the task cancels its turn and kills its tool processes.
            timeout = spec.runtime.timeout_seconds
            why = f"the run exceeded its timeout of {timeout} s"
            await self._tasks.stop(task_id, why)
            return "timeout", why
        status, error = outcome_of(result)
        session_id = spec.target.session_id
        denied = await self._denied_calls(session_id, task_id)
        if denied:
            # A run at a level that asks a human has nobody to answer: its requests
            # expire and are denied. The run's record must say so.
            error = "; ".join(filter(None, [error, denied]))
        return status, error

    async def _denied_calls(self, session_id: str, task_id: str) -> str | None:
        calls = await self._calls.list_for_session(session_id)
        denied = [c for c in calls if c.task_id == task_id and c.end_state == "denied"]
        if not denied:
            return None
        parts = [f"{c.tool_name} ({c.end_reason or 'denied'})" for c in reversed(denied)]
        return f"{len(denied)} tool call(s) denied: " + ", ".join(parts)

    async def _finish(
        self, run_id: str, status: str, error: str | None, failed_job: str | None = None
    ) -> None:
        """Record the run's end, now or once the store takes it (see ``ends``); a stop
        or an exit waits for the run's turn, not for the disk. With ``failed_job``, the
        end is announced (cron.run_failed) once stored, if it is the run's: not when
        another end stood first (a survivor ended the run "node lost", and said so,
        while this node was cut off)."""
        now = self._clock().timestamp()

        async def finish() -> None:
            ended = await self._runs.finish_run(run_id, status, error, now)
            if ended and failed_job is not None:
                self.tell_failed(failed_job, run_id, status, error)

        await self.ends.store(finish, f"the end of cron run {run_id}")


def run_failed_event(job_id: str, run_id: str, status: str, error: str | None) -> dict[str, Any]:
    """What the ``cron.run_failed`` webhook event says (wherever a run ends so)."""
    return {"job_id": job_id, "run_id": run_id, "status": status, "error": error}
