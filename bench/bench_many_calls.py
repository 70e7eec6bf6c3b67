"""1,000 shell calls in flight across 100 sessions: does listing stay fast?

Each of 100 sessions runs a turn whose model reply asks for 10 parallel `sleep` calls.
Once all 1,000 run, GET /api/tool-calls/{sid} (10 items) is loaded with 8 connections;
then every task is stopped, 8 stop requests at a time, and once more, after a second
ramp, one at a time.
Run: python bench/bench_many_calls.py   (targets: p99 < 20 ms; all stopped < 2 s)
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import loadgen
from _support import FakeModel, Server, chat_body, report, shell_reply, wait_until

SESSIONS = 100
PER_SESSION = 10
#: The command of every call, and its process's argv.
COMMAND = "sleep 300"
#: Stop requests in flight at once, as the list's load has 8 connections.
STOPS_AT_ONCE = 8


@dataclass
class ManyCalls:
    """The sessions' tasks, each submitted to one of the servers in turn."""

    servers: Sequence[Server]
    sessions: list[str]
    tasks: list[tuple[Server, str]]

    def in_flight(self) -> int:
        """Calls not ended over all sessions, as the first server lists them."""
        client = self.servers[0].client
        return sum(client.get(f"/api/tool-calls/{s}").json()["total"] for s in self.sessions)

    def stop(self, at_once: int = 1) -> float:
        """Stop every task (on the server it was submitted to), ``at_once`` requests at a
        time; seconds until no call is in flight."""

        def stop_one(task: tuple[Server, str]) -> None:
            server, task_id = task
            server.client.post(f"/api/console/chat/task/{task_id}/stop").raise_for_status()

        started = time.perf_counter()
        with ThreadPoolExecutor(at_once) as pool:
            list(pool.map(stop_one, self.tasks))
        wait_until(lambda: self.in_flight() == 0, timeout=300, step=0.2)
        return time.perf_counter() - started


def start_many(servers: Sequence[Server], model: FakeModel) -> tuple[ManyCalls, float]:
    """Submit the sessions' turns round-robin over ``servers``; returns once all 1,000
    calls are listed running and their processes run, with the seconds from the first
    request to the start of the last process (read from the processes themselves, so
    the slow polling here, which keeps this client off the machine's two cores, adds
    nothing to the figure)."""
    model.script(*[shell_reply(*[COMMAND] * PER_SESSION)] * SESSIONS)
    sessions = [f"console:many-{i:03d}" for i in range(SESSIONS)]
    asked = _process_clock_now()
    tasks = []
    for i, session in enumerate(sessions):
        server = servers[i % len(servers)]
        task = server.client.post("/api/console/chat/task", json=chat_body("go", session))
        tasks.append((server, task.json()["task_id"]))
    many = ManyCalls(servers, sessions, tasks)
    wait_until(lambda: many.in_flight() == SESSIONS * PER_SESSION, timeout=300, step=1.0)
    argv = COMMAND.split()
    starts = wait_until(lambda: _all_started(servers, argv), timeout=300, step=1.0)
    return many, max(starts) - asked


def _process_clock_now() -> float:
    """Now, on the clock of process start times (whole-second boot time plus clock
    ticks, which may stand up to a second off ``time.time()``): a child's start."""
    import psutil

    probe = subprocess.Popen(["sleep", "1"])
    try:
        return float(psutil.Process(probe.pid).create_time())
    finally:
        probe.kill()
        probe.wait()


def _all_started(servers: Sequence[Server], argv: list[str]) -> list[float] | None:
    starts = [t for s in servers for t in s.command_starts(argv)]
    return starts if len(starts) >= SESSIONS * PER_SESSION else None


def main() -> None:
    model = FakeModel()
    server = Server(TETHER_MAX_CALLS_TOTAL="4096", TETHER_CANCEL_GRACE_SECONDS="0.5")
    try:
        server.start()
        server.register(model)
        many, ramp = start_many([server], model)
        path = f"/api/tool-calls/{many.sessions[SESSIONS // 2]}"
        loadgen.run(server.port, path, seconds=1)
        load = loadgen.run(server.port, path, seconds=5)
        note = f"{load.tool}; {load.rps:.0f} req/s; all 1,000 running after {ramp:.1f} s"
        report("list p99 with 1,000 calls live", load.p99_ms, "ms", "< 20", load.p99_ms < 20, note)
        stopped = many.stop(STOPS_AT_ONCE)
        note = f"{STOPS_AT_ONCE} stop requests at a time"
        report("stop 100 tasks / 1,000 calls", stopped, "s", "< 2", stopped < 2, note)
        many, _ramp = start_many([server], model)
        report("the same, one stop request at a time", many.stop(), "s", "(info)", True)
    finally:
        server.close()
        model.close()


if __name__ == "__main__":
    main()
