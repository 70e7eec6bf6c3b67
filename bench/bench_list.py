"""GET /api/tool-calls/{sid} throughput and latency with 8 connections, five calls live.

Run: python bench/bench_list.py   (targets: >= 3,000 req/s, p99 < 10 ms)
"""

from __future__ import annotations

import loadgen
from _support import FakeModel, Server, chat_body, report, shell_reply, wait_until

SESSION = "console:bench-list"


def main() -> None:
    model = FakeModel()
    server = Server()
    try:
        server.start()
        server.register(model)
        model.script(shell_reply(*["sleep 120"] * 5), {"text": "done"})
        task = server.client.post("/api/console/chat/task", json=chat_body("go", SESSION)).json()
        path = f"/api/tool-calls/{SESSION}"
        wait_until(lambda: server.client.get(path).json()["total"] == 5)
        loadgen.run(server.port, path, seconds=1)  # warm-up
        load = loadgen.run(server.port, path, seconds=5)
        note = f"{load.tool}, 8 connections, 5 live calls"
        report("list calls throughput", load.rps, "req/s", ">= 3000", load.rps >= 3000, note)
        report("list calls p99", load.p99_ms, "ms", "< 10", load.p99_ms < 10, note)
        server.client.post(f"/api/console/chat/task/{task['task_id']}/stop")
    finally:
        server.close()
        model.close()


if __name__ == "__main__":
    main()
