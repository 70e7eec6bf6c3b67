"""/api/healthz latency while 200 chat turns wait on a model that has not answered yet.

The turns are held open by the fake model (it answers only once released), so the server
carries 200 live tasks, their open model connections and their records while /api/healthz
is timed. Run: python bench/bench_busy_healthz.py   (targets: median < 100 ms, max < 500 ms)
"""

from __future__ import annotations

import threading
import time
import uuid

from _support import FakeModel, Server, chat_body, helpers, median, pct, report, wait_until

TURNS = 200
PROBES = 30


def main() -> None:
    model = FakeModel()
    model.srv.RequestHandlerClass = helpers.SlowModelHandler
    model.srv.release = threading.Event()
    model.srv.arrived = 0
    model.srv.arrived_lock = threading.Lock()
    server = Server()
    try:
        server.start()
        server.register(model)
        for _ in range(TURNS):
            body = chat_body("hi", f"console:busy-{uuid.uuid4().hex[:8]}")
            server.client.post("/api/console/chat/task", json=body).raise_for_status()
        wait_until(lambda: model.srv.arrived >= TURNS, timeout=120, step=0.05)
        timings = []
        for _ in range(PROBES):
            started = time.perf_counter()
            server.client.get("/api/healthz").raise_for_status()
            timings.append((time.perf_counter() - started) * 1000)
        note = f"{TURNS} turns waiting on the model; {PROBES} probes"
        middle, worst = median(timings), max(timings)
        report("healthz with 200 turns waiting (median)", middle, "ms", "< 100", middle < 100, note)
        report("healthz with 200 turns waiting (max)", worst, "ms", "< 500", worst < 500, note)
        report("healthz with 200 turns waiting (p90)", pct(timings, 90), "ms", "(info)", True)
    finally:
        model.srv.release.set()
        server.close()
        model.close()


if __name__ == "__main__":
    main()
