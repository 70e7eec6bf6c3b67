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


def main(lines: int) -> None:
    model = FakeModel()
    server = Server()
    try:
        server.start()
        server.register(model)
        printer = (
            f'python -c "import time; [(print(repr(time.time()), flush=True), time.sleep(0.01))'
            f' for _ in range({lines})]"'
        )
        command = f"while [ ! -e go ]; do sleep 0.01; done; {printer}"
        model.script(shell_reply(command), {"text": "ok"})
        server.client.post("/api/console/chat/task", json=chat_body("go", SESSION))
        listing = f"/api/tool-calls/{SESSION}"
        call_id = wait_until(lambda: server.client.get(listing).json()["items"])[0]["tool_call_id"]
        lags: list[float] = []
        with server.client.stream("GET", f"{listing}/{call_id}/stream") as resp:
            (server.workspace / "go").touch()
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                arrived = time.time()
                event = json.loads(line[5:])
                if event["type"] == "done":
                    break
                lags += [(arrived - float(x)) * 1000 for x in event["text"].split()]
        assert len(lags) == lines, len(lags)
        value = pct(lags, 99)
        note = f"{lines} lines, median {median(lags):.1f} ms"
        report("tool line -> /stream p99", value, "ms", "< 50", value < 50, note)
    finally:
        server.close()
        model.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
