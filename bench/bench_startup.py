"""Start to healthy, and resident memory once idle.

Run: python bench/bench_startup.py [runs]   (targets: median start < 1.5 s, idle RSS < 120 MB)
"""

from __future__ import annotations

import sys
import time

import psutil
from _support import Server, median, report


def main(runs: int) -> None:
    starts: list[float] = []
    rss: list[float] = []
    for _ in range(runs):
        server = Server()
        try:
            starts.append(server.start())
            for _ in range(20):  # touch a few routes, as a console would
                server.client.get("/api/chats")
                server.client.get("/api/models")
            time.sleep(0.5)
            assert server.proc is not None
            rss.append(psutil.Process(server.proc.pid).memory_info().rss / 2**20)
        finally:
            server.close()
    start = median(starts)
    report("start to healthy (median)", start, "s", "< 1.5", start < 1.5, f"{runs} runs")
    memory = median(rss)
    report("idle RSS (median)", memory, "MB", "< 120", memory < 120, f"{runs} runs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
