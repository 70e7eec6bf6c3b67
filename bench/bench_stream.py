"""A line printed by a tool -> delivered on /api/tool-calls/{sid}/{id}/stream.

The tool prints its own wall-clock time on each line (every 10 ms); the reader subtracts
it from the time the line arrives. Run: python bench/bench_stream.py [lines]
(target: p99 < 50 ms)
"""

from __future__ import annotations

import json
import sys
import time

from _support import FakeModel, Server, chat_body, median, pct, report, shell_reply, wait_until

SESSION = "console:bench-stream"


def line_lags(
    server: Server, model: FakeModel, session: str, lines: int, via: Server | None = None
) -> list[float]:
    """A call on ``server`` prints ``lines`` time stamps; read on ``via``'s /stream (default:
    the same server); milliseconds from each print to its arrival."""
    printer = (
        f'python -c "import time; [(print(repr(time.time()), flush=True), time.sleep(0.01))'
        f' for _ in range({lines})]"'
    )
    # The printer waits for the reader to be connected, so every line is seen live.
    go = f"go-{session.split(':')[1]}"
    command = f"while [ ! -e {go} ]; do sleep 0.01; done; {printer}"
    model.script(shell_reply(command), {"text": "ok"})
    task = server.client.post("/api/console/chat/task", json=chat_body("go", session)).json()
    listing = f"/api/tool-calls/{session}"
    call_id = wait_until(lambda: server.client.get(listing).json()["items"])[0]["tool_call_id"]
    lags: list[float] = []
    with (via or server).client.stream("GET", f"{listing}/{call_id}/stream") as resp:
        resp.raise_for_status()
        (server.workspace / go).touch()
        for line in resp.iter_lines():
            if not line.startswith("data:"):
                continue
            arrived = time.time()
            event = json.loads(line[5:])
            if event["type"] == "done":
                break
            lags += [(arrived - float(x)) * 1000 for x in event["text"].split()]
    assert len(lags) == lines, len(lags)
    # The turn asks the model once more; let it, before anyone scripts the next replies.
    path = f"/api/console/chat/task/{task['task_id']}"
    wait_until(lambda: server.client.get(path).json()["status"] == "finished", step=0.01)
    return lags


def main(lines: int) -> None:
    model = FakeModel()
    server = Server()
    try:
        server.start()
        server.register(model)
        lags = line_lags(server, model, SESSION, lines)
        value = pct(lags, 99)
        note = f"{lines} lines, median {median(lags):.1f} ms"
        report("tool line -> /stream p99", value, "ms", "< 50", value < 50, note)
    finally:
        server.close()
        model.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
