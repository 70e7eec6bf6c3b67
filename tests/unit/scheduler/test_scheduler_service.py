"""The cron scheduler in-process: real SQLite, a clock the test moves, tick() driven directly."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from cron_parts import CronNode, FakeClock, FakeTasks

from tether.errors import Invalid
from tether.scheduler.job_parts import MAX_SECONDS
from tether.scheduler.jobs import CronJobs
from tether.scheduler.runner import RunExecutor
from tether.scheduler.service import CronScheduler
from tether.store import cron as cron_store
from tether.store.cron import BUSY


def text_job(job_id: str, cron: str, **runtime: Any) -> dict[str, Any]:
    return {
        "id": job_id,
        "name": f"job {job_id}",
        "schedule": {"type": "cron", "cron": cron},
        "task_type": "text",
        "text": f"reminder from {job_id}",
        "runtime": runtime,
    }


def agent_job(job_id: str, cron: str, **runtime: Any) -> dict[str, Any]:
    job = {**text_job(job_id, cron, **runtime), "task_type": "agent", "text": None}
    return {**job, "request": {"input": "check"}}


def at(hour: int, minute: int, second: float = 0) -> datetime:
    whole = int(second)
    return datetime(2026, 3, 2, hour, minute, whole, int((second - whole) * 1e6), tzinfo=UTC)


async def history(node: CronNode, job_id: str) -> list[tuple[str, str, datetime | None]]:
    """(status, trigger, scheduled_for) oldest first."""
    runs = await node.jobs.history(job_id)
    return [
        (r.status, r.trigger, r.scheduled_for and datetime.fromtimestamp(r.scheduled_for, UTC))
        for r in reversed(runs)
    ]


async def test_cron_job_fires_each_tick_once(node: CronNode, clock: FakeClock) -> None:
    await node.jobs.create(text_job("every5", "*/5 * * * *"))
    assert await node.scheduler.tick(clock.set(at(10, 4, 59))) == []
    assert len(await node.scheduler.tick(clock.set(at(10, 5, 0.2)))) == 1
    await node.scheduler.idle()
    assert await node.scheduler.tick(clock.set(at(10, 5, 30))) == []
    assert len(await node.scheduler.tick(clock.set(at(10, 10)))) == 1
    await node.scheduler.idle()

    assert await history(node, "every5") == [
        ("success", "scheduled", at(10, 5)),
        ("success", "scheduled", at(10, 10)),
    ]
    messages = await node.store.chats.history("cron:every5")
    assert [(m.kind, m.payload["content"]) for m in messages] == [
        ("assistant", "reminder from every5"),
        ("assistant", "reminder from every5"),
    ]
    state = await node.jobs.state("every5")
    assert state.next_run_at == at(10, 15)
    assert state.last_status == "success"


async def test_missed_tick_within_grace_runs_once_after_restart(
    node: CronNode, clock: FakeClock, open_cron: Any
) -> None:
    await node.jobs.create(text_job("hourly", "0 * * * *", misfire_grace_seconds=300))
    await node.db.close()  # the server goes down at 10:01 and comes back at 13:02

    clock.set(at(13, 2))
    restarted: CronNode = await open_cron()
    started = await restarted.scheduler.tick(clock())
    await restarted.scheduler.idle()

    assert len(started) == 1
    assert await history(restarted, "hourly") == [
        ("skipped", "scheduled", at(11, 0)),
        ("skipped", "scheduled", at(12, 0)),
        ("success", "scheduled", at(13, 0)),
    ]
    assert (await restarted.jobs.state("hourly")).next_run_at == at(14, 0)
    assert await restarted.scheduler.tick(clock.set(at(13, 3))) == []


async def test_missed_tick_beyond_grace_is_recorded_skipped(
    node: CronNode, clock: FakeClock, open_cron: Any
) -> None:
    await node.jobs.create(text_job("hourly", "0 * * * *", misfire_grace_seconds=300))
    await node.db.close()

    clock.set(at(11, 10))
    restarted: CronNode = await open_cron()
    assert await restarted.scheduler.tick(clock()) == []

    runs = await restarted.jobs.history("hourly")
    assert [(r.status, r.error is not None) for r in runs] == [("skipped", True)]
    assert "misfire grace" in (runs[0].error or "")
    assert await restarted.store.chats.history("cron:hourly") == []
    assert (await restarted.jobs.state("hourly")).next_run_at == at(12, 0)


async def test_two_schedulers_on_one_database_fire_each_tick_once(
    node: CronNode, clock: FakeClock, open_cron: Any
) -> None:
    other: CronNode = await open_cron()
    await node.jobs.create(text_job("minutely", "* * * * *", misfire_grace_seconds=0))

    for minute in range(2, 12):
        now = clock.set(at(10, minute, 0.1))
        first, second = await asyncio.gather(node.scheduler.tick(now), other.scheduler.tick(now))
        assert len(first) + len(second) == 1, (minute, first, second)
        await asyncio.gather(node.scheduler.idle(), other.scheduler.idle())

    runs = await history(node, "minutely")
    assert runs == [("success", "scheduled", at(10, m)) for m in range(2, 12)]
    assert len(await node.store.chats.history("cron:minutely")) == 10


async def test_due_tick_while_a_run_is_in_progress_is_skipped(
    clock: FakeClock, open_cron: Any
) -> None:
    tasks = FakeTasks(instant=False)
    node: CronNode = await open_cron(tasks)
    await node.jobs.create({**agent_job("slow", "*/5 * * * *"), "approval_level": "strict"})

    assert len(await node.scheduler.tick(clock.set(at(10, 5)))) == 1
    await tasks.wait_submitted()
    assert await node.scheduler.tick(clock.set(at(10, 10))) == []
    tasks.finish("task-0", {"status": "completed", "text": "done"})
    await node.scheduler.idle()

    runs = await node.jobs.history("slow")
    assert [(r.status, r.error, r.task_id) for r in runs] == [
        ("skipped", BUSY, None),
        ("success", None, "task-0"),
    ]
    assert tasks.submitted == [("cron:slow", "strict")]


async def test_timeout_stops_the_task(clock: FakeClock, open_cron: Any) -> None:
    tasks = FakeTasks(instant=False)
    node: CronNode = await open_cron(tasks)
    await node.jobs.create(agent_job("stuck", "0 * * * *", timeout_seconds=1))

    run_id = await node.jobs.run_now("stuck")
    await node.scheduler.idle()

    (run,) = await node.jobs.history("stuck")
    assert (run.id, run.trigger, run.status) == (run_id, "manual", "timeout")
    assert tasks.stopped == ["task-0"]


async def test_failed_task_is_an_error_run(clock: FakeClock, open_cron: Any) -> None:
    tasks = FakeTasks(instant=False)
    node: CronNode = await open_cron(tasks)
    await node.jobs.create(agent_job("flaky", "0 * * * *"))
    await node.jobs.run_now("flaky")
    tasks.finish(await tasks.wait_submitted(), {"status": "failed", "error": "model unavailable"})
    await node.scheduler.idle()

    state = await node.jobs.state("flaky")
    assert (state.last_status, state.last_error) == ("error", "model unavailable")


async def test_paused_job_does_not_fire_and_resume_owes_nothing(
    node: CronNode, clock: FakeClock
) -> None:
    await node.jobs.create(text_job("p", "*/5 * * * *"))
    await node.jobs.set_enabled("p", False)
    assert await node.scheduler.tick(clock.set(at(10, 5))) == []
    assert (await node.jobs.state("p")).next_run_at is None

    clock.set(at(10, 12))
    await node.jobs.set_enabled("p", True)
    assert await node.scheduler.tick(clock()) == []
    assert (await node.jobs.state("p")).next_run_at == at(10, 15)
    assert len(await node.scheduler.tick(clock.set(at(10, 15)))) == 1
    await node.scheduler.idle()
    assert await history(node, "p") == [("success", "scheduled", at(10, 15))]


def once_job(job_id: str, run_at: datetime) -> dict[str, Any]:
    job = text_job(job_id, "* * * * *")
    return {**job, "schedule": {"type": "once", "run_at": run_at.isoformat()}}


async def test_a_once_time_passed_while_paused_is_not_owed(
    node: CronNode, clock: FakeClock
) -> None:
    await node.jobs.create(once_job("o", at(10, 5)))
    await node.jobs.set_enabled("o", False)
    assert await node.scheduler.tick(clock.set(at(10, 6))) == []

    await node.jobs.set_enabled("o", True)
    assert await node.scheduler.tick(clock.set(at(10, 7))) == []
    assert await history(node, "o") == []
    assert (await node.jobs.state("o")).next_run_at is None


async def test_a_fired_once_job_can_be_put_back_with_a_new_name(
    node: CronNode, clock: FakeClock
) -> None:
    await node.jobs.create(once_job("o", at(10, 5)))
    assert len(await node.scheduler.tick(clock.set(at(10, 5)))) == 1
    await node.scheduler.idle()
    spec = (await node.jobs.get("o")).model_dump(mode="json")

    renamed = await node.jobs.replace("o", {**spec, "name": "renamed"})
    assert renamed.name == "renamed"
    assert await node.scheduler.tick(clock.set(at(10, 9))) == []
    assert await history(node, "o") == [("success", "scheduled", at(10, 5))]
    with pytest.raises(Invalid, match="invalid cron job"):  # a new time must be ahead
        await node.jobs.replace("o", {**spec, "schedule": once_job("o", at(10, 8))["schedule"]})


async def test_run_left_running_by_a_crash_is_closed_on_restart(
    clock: FakeClock, open_cron: Any
) -> None:
    tasks = FakeTasks(instant=False)
    first: CronNode = await open_cron(tasks)
    await first.jobs.create(agent_job("crash", "0 * * * *"))
    await first.jobs.run_now("crash")
    await tasks.wait_submitted()

    restarted: CronNode = await open_cron()
    (run,) = await restarted.jobs.history("crash")
    assert (run.status, run.error) == ("error", "server restarted during the run")
    event = {"job_id": "crash", "run_id": run.id, "status": "error", "error": run.error}
    assert restarted.notified == [("cron.run_failed", event)]


async def _run_then_restart(
    open_cron: Any, clock: FakeClock, job_id: str, timeout: int, down_for: float = 0.0
) -> tuple[CronNode, str]:
    """A manual run of a new agent job whose turn is still going when its server goes
    away; then, ``down_for`` seconds later, a start that took that turn up again. The
    restarted node and the turn's task id."""
    first: CronNode = await open_cron(FakeTasks(instant=False))
    await first.jobs.create(agent_job(job_id, "0 * * * *", timeout_seconds=timeout))
    await first.jobs.run_now(job_id)
    task_id = await first.tasks.wait_submitted()
    clock.advance(down_for)
    again = FakeTasks(instant=False)
    return await open_cron(again, [again.resume(task_id)]), task_id


async def test_a_run_whose_turn_is_resumed_goes_on_to_its_real_end(
    clock: FakeClock, open_cron: Any
) -> None:
    restarted, task_id = await _run_then_restart(open_cron, clock, "durable", 600)
    again = restarted.tasks
    (run,) = await restarted.store.cron.history("durable")
    assert (run.status, run.task_id) == ("running", task_id)

    again.finish(task_id, {"status": "completed", "text": "built"})
    await restarted.scheduler.idle()
    (run,) = await restarted.store.cron.history("durable")
    assert (run.status, run.error) == ("success", None)
    assert again.stopped == []


async def test_a_resumed_run_keeps_the_timeout_counted_from_its_start(
    clock: FakeClock, open_cron: Any
) -> None:
    # The server was down past the run's timeout.
    restarted, task_id = await _run_then_restart(open_cron, clock, "slow", 60, down_for=61)
    again = restarted.tasks
    await restarted.scheduler.idle()
    (run,) = await restarted.store.cron.history("slow")
    assert (run.status, run.error) == ("timeout", "the run exceeded its timeout of 60 s")
    assert again.stopped == [task_id]


async def test_a_job_that_cannot_be_handled_does_not_stop_the_others(
    node: CronNode, clock: FakeClock
) -> None:
    # A row no current JobSpec accepts (say, written by a newer version).
    broken_at = at(10, 0).timestamp()
    assert await node.store.cron.create("broken", {"name": "?"}, True, broken_at, broken_at)
    await node.jobs.create(text_job("fine", "*/5 * * * *"))

    assert len(await node.scheduler.tick(clock.set(at(10, 5)))) == 1
    await node.scheduler.idle()
    assert await history(node, "fine") == [("success", "scheduled", at(10, 5))]
    assert await node.store.cron.history("broken") == []


async def test_history_keeps_the_newest_runs_only(
    node: CronNode, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cron_store, "HISTORY_KEEP", 3)
    await node.jobs.create(text_job("chatty", "0 * * * *"))
    run_ids = []
    for _ in range(5):
        clock.advance(60)
        run_ids.append(await node.jobs.run_now("chatty"))
        await node.scheduler.idle()

    assert [r.id for r in await node.jobs.history("chatty")] == run_ids[:1:-1]


class ToldWhenAsked(cron_store.CronRepository):
    """The real repository; says when the loop has asked for its next sleep."""

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.asked = asyncio.Event()

    async def earliest_next_run(self) -> float | None:
        earliest = await super().earliest_next_run()
        self.asked.set()
        return earliest


@pytest.mark.timeout(20)  # the failure this guards against is a hang
async def test_a_stop_that_comes_as_the_loop_is_woken_still_stops_it(
    node: CronNode, clock: FakeClock
) -> None:
    # The loop parks on its wake-up event right after asking for the earliest tick; a
    # job change wakes it in the same turn as the server's shutdown cancels it. With
    # asyncio.wait_for (Python 3.11) the cancel was lost and the shutdown hung.
    repo = ToldWhenAsked(node.db)
    executor = RunExecutor(repo, node.store.chats, node.store.tool_calls, node.tasks, clock)
    scheduler = CronScheduler(repo, executor, clock)
    scheduler.start()
    await repo.asked.wait()
    scheduler.wake()
    await scheduler.shutdown()  # cancels the loop in this same turn


async def test_a_run_whose_job_was_deleted_before_it_started_does_not_start(
    node: CronNode, clock: FakeClock
) -> None:
    """A tick claimed (its run recorded) just before the job's delete: the run the
    scheduler then launches finds its row gone and asks the agent nothing."""
    spec = await node.jobs.create(agent_job("gone", "0 * * * *"))
    assert await node.store.cron.start_manual("gone", "r1", clock().timestamp(), "me") == (
        "started"
    )
    assert await node.store.cron.delete("gone")
    node.scheduler.launch(spec, "r1")
    await node.scheduler.idle()
    assert node.tasks.submitted == []
    assert node.notified == []


async def test_a_run_taken_over_is_not_also_failed_by_another_recovery(
    node: CronNode, clock: FakeClock
) -> None:
    """Two servers recover the same gone owner: the run one of them took over (its turn
    resumed there) is not failed by the other, and each reports only what it changed."""
    await node.jobs.create(agent_job("shared", "0 * * * *"))
    now = clock().timestamp()
    assert await node.store.cron.start_manual("shared", "r1", now, "gone") == "started"
    await node.store.cron.set_run_task("r1", "t1")

    taken = await node.store.cron.take_over_runs(["t1"], {"gone"}, "server-a")
    assert [r.id for r in taken] == ["r1"]
    assert await node.store.cron.take_over_runs(["t1"], {"gone"}, "server-c") == []
    assert await node.store.cron.fail_running("restarted", now, {"gone"}) == []
    (run,) = await node.store.cron.history("shared")
    assert run.status == "running"


async def test_a_job_stored_before_the_bounds_still_loads_and_can_be_corrected(
    node: CronNode, clock: FakeClock
) -> None:
    """An older version took a timeout of 999,999,999 s (a natural "no timeout"): such
    a job still lists, read as the longest timeout there is, and a PUT, which the
    bounds apply to, corrects it."""
    spec = agent_job("old", "0 * * * *", timeout_seconds=999_999_999)
    now = clock().timestamp()
    assert await node.store.cron.create("old", spec, True, now, now)

    (listed,) = await node.jobs.list_jobs()
    assert listed.runtime.timeout_seconds == MAX_SECONDS  # read as the longest there is
    stored = listed.model_dump(mode="json")
    too_long = {**stored, "runtime": {**stored["runtime"], "timeout_seconds": 999_999_999}}
    with pytest.raises(Invalid):
        await node.jobs.replace("old", too_long)
    fixed = {**stored, "runtime": {**stored["runtime"], "timeout_seconds": 3600}}
    assert (await node.jobs.replace("old", fixed)).runtime.timeout_seconds == 3600


async def test_a_job_without_a_level_gets_the_servers_and_a_put_without_one_keeps_it(
    node: CronNode,
) -> None:
    """Jobs ran at "auto" whatever TETHER_DEFAULT_APPROVAL_LEVEL said (a chat on the same
    server ran at it), and a PUT from a client that knows no levels reset them so."""
    jobs = CronJobs(node.store.cron, node.scheduler, default_level="strict")
    created = await jobs.create(agent_job("lv", "0 * * * *"))
    assert created.approval_level == "strict"
    assert (await jobs.get("lv")).approval_level == "strict"
    chosen = await jobs.create({**agent_job("lv2", "0 * * * *"), "approval_level": "off"})
    assert chosen.approval_level == "off"

    await jobs.replace("lv", {**agent_job("lv", "0 * * * *"), "approval_level": "smart"})
    again = await jobs.replace("lv", {**agent_job("lv", "0 * * * *"), "name": "renamed"})
    assert (again.name, again.approval_level) == ("renamed", "smart")


async def test_a_put_that_names_no_unattended_policy_keeps_the_jobs(node: CronNode) -> None:
    """A QwenPaw client's PUT (it knows no when_unattended) set a job that waits for a
    person back to the default, refusing at once."""
    jobs = CronJobs(node.store.cron, node.scheduler)
    await jobs.create({**agent_job("wu", "0 * * * *"), "when_unattended": "wait"})
    kept = await jobs.replace("wu", {**agent_job("wu", "0 * * * *"), "name": "renamed"})
    assert (kept.name, kept.when_unattended) == ("renamed", "wait")
    cleared = await jobs.replace("wu", {**agent_job("wu", "0 * * * *"), "when_unattended": None})
    assert cleared.when_unattended is None
