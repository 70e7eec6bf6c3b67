"""A chat turn with one shell tool call against a zero-latency fake model, end to end:
POST /api/console/chat (SSE) until its ``final`` event.

Run: python bench/bench_chat.py [rounds]   (target: median < 30 ms, p90 < 40 ms)
"""

from __future__ import annotations

import json
import sys
import time

from _support import FakeModel, Server, chat_body, median, pct, report, shell_reply


def one_turn(server: Server, model: FakeModel, session: str) -> float:
    model.script(shell_reply("echo hi"), {"text": "done"})
    started = time.perf_counter()
    path = "/api/console/chat?events=tether"
    with server.client.stream("POST", path, json=chat_body("go", session)) as resp:
        for line in resp.iter_lines():
            if line.startswith("data:") and json.loads(line[5:])["type"] == "final":
                assert json.loads(line[5:])["result"]["status"] == "completed", line
                break
    return time.perf_counter() - started


def main(rounds: int) -> None:
    model = FakeModel()
    server = Server()
    try:
        server.start()
        server.register(model)
        for i in range(3):  # warm-up: first requests import the SDK and open the DB pages
            one_turn(server, model, f"console:warm-{i}")
        ms = [one_turn(server, model, f"console:bench-{i}") * 1000 for i in range(rounds)]
        value, p90 = median(ms), pct(ms, 90)
        note = f"{rounds} turns, p90 {p90:.0f} ms (target < 40)"
        ok = value < 30 and p90 < 40
        report("chat turn with one tool call (median)", value, "ms", "< 30", ok, note)
    finally:
        server.close()
        model.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
