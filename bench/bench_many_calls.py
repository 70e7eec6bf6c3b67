"""1,000 shell calls in flight across 100 sessions: does listing stay fast?

Each of 100 sessions runs a turn whose model reply asks for 10 parallel `sleep` calls.
Once all 1,000 run, GET /api/tool-calls/{sid} (10 items) is loaded with 8 connections.
Run: python bench/bench_many_calls.py   (target: p99 < 20 ms)
"""

from __future__ import annotations

import time

import loadgen
from _support import FakeModel, Server, chat_body, report, shell_reply, wait_until

SESSIONS = 100
PER_SESSION = 10


def main() -> None:
    model = FakeModel()
    server = Server(TETHER_MAX_CALLS_TOTAL="4096", TETHER_CANCEL_GRACE_SECONDS="0.5")
    try:
        server.start()
        server.register(model)
        model.script(*[shell_reply(*["sleep 300"] * PER_SESSION)] * SESSIONS)
        sessions = [f"console:many-{i:03d}" for i in range(SESSIONS)]
        started = time.perf_counter()
        tasks = [
            server.client.post("/api/console/chat/task", json=chat_body("go", s)).json()
            for s in sessions
        ]

        def in_flight() -> int:
            return sum(server.client.get(f"/api/tool-calls/{s}").json()["total"] for s in sessions)

        wait_until(lambda: in_flight() == SESSIONS * PER_SESSION, timeout=300, step=0.5)
        ramp = time.perf_counter() - started
        path = f"/api/tool-calls/{sessions[SESSIONS // 2]}"
        loadgen.run(server.port, path, seconds=1)
        load = loadgen.run(server.port, path, seconds=5)
        note = f"{load.tool}; {load.rps:.0f} req/s; all 1,000 running after {ramp:.1f} s"
        report("list p99 with 1,000 calls live", load.p99_ms, "ms", "< 20", load.p99_ms < 20, note)
        stop_started = time.perf_counter()
        for task in tasks:
            server.client.post(f"/api/console/chat/task/{task['task_id']}/stop")
        wait_until(lambda: in_flight() == 0, timeout=300, step=0.2)
        stopped = time.perf_counter() - stop_started
        report("stop 100 tasks / 1,000 calls", stopped, "s", "(info)", True)
    finally:
        server.close()
        model.close()


if __name__ == "__main__":
    main()
