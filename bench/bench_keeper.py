"""The keeper's runner on its own: spawn overhead, memory per live call, 1,000 calls.

Talks to a real runner (python -m tether.keeper) in a temporary home over its socket,
as the server does. Spawn overhead is compared with what the local launcher does (an
asyncio subprocess with pipes, in a new session) for the same command.
Run: python bench/bench_keeper.py   (targets: +3 ms per call, 1 MB per live call,
1,000 calls running within 5 s, all stopped within 2 s)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psutil
from _support import report

from tether.keeper import client
from tether.keeper.client import KeeperClient

CALLS = 1000
SAMPLES = 100


def fields(call_id: str, command: str) -> dict[str, object]:
    return {
        "call_id": call_id,
        "argv": ["/bin/sh", "-c", command],
        "cwd": "/",
        "env": {"PATH": os.environ["PATH"]},
        "marker": f"bench-keeper:{call_id}",
        "grace": 0.5,
    }


async def local_spawn() -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        "true",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    elapsed = time.perf_counter() - started
    await proc.communicate()
    return elapsed


async def keeper_spawn(keeper: KeeperClient, n: int) -> float:
    started = time.perf_counter()
    await keeper.request("start", **fields(f"spawn-{n}", "true"))
    return time.perf_counter() - started


async def many(keeper: KeeperClient, runner: psutil.Process) -> None:
    before = runner.memory_info().rss
    watch = await keeper.watch()
    started = time.perf_counter()
    gate = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with gate:
            await keeper.request("start", **fields(f"many-{i}", "exec sleep 300"))

    await asyncio.gather(*(one(i) for i in range(CALLS)))
    ramp = time.perf_counter() - started
    listed = await keeper.request("list")
    running = [c for c in listed["calls"] if c["call_id"].startswith("many-")]
    assert len(running) == CALLS, len(running)
    per_call = (runner.memory_info().rss - before) / CALLS
    list_times = []
    for _ in range(50):
        t = time.perf_counter()
        await keeper.request("list")
        list_times.append(time.perf_counter() - t)
    stop_started = time.perf_counter()
    await keeper.request("signal", call_ids=[f"many-{i}" for i in range(CALLS)], force=False)
    ended = 0
    async for event in watch:
        if event["event"] == "ended" and str(event["call_id"]).startswith("many-"):
            ended += 1
            if ended == CALLS:
                break
    stopped = time.perf_counter() - stop_started
    watch.close()
    report("keeper: 1,000 calls running after", ramp, "s", "< 5", ramp < 5, "32 starts in flight")
    report(
        "keeper: runner memory per live call",
        per_call / 1024,
        "KiB",
        "< 1024",
        per_call < 1 << 20,
        "runner RSS growth / calls (the commands' own memory apart)",
    )
    p99 = sorted(list_times)[int(len(list_times) * 0.99) - 1] * 1000
    report("keeper: runner list p99 with 1,000 live", p99, "ms", "(info)", True)
    report("keeper: stop 1,000 calls (graceful)", stopped, "s", "< 2", stopped < 2)


async def main_async(home: Path) -> None:
    identity = client.ensure_runner(home)
    runner = psutil.Process(identity.pid)
    keeper = KeeperClient(home)
    local = [await local_spawn() for _ in range(SAMPLES)]
    kept = [await keeper_spawn(keeper, n) for n in range(SAMPLES)]
    overhead = (statistics.median(kept) - statistics.median(local)) * 1000
    report(
        "keeper: spawn overhead over local, median",
        overhead,
        "ms",
        "<= 3",
        overhead <= 3,
        f"local {statistics.median(local) * 1000:.2f} ms, keeper "
        f"{statistics.median(kept) * 1000:.2f} ms (request to pid)",
    )
    await many(keeper, runner)


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="tether-bench-keeper-"))
    try:
        asyncio.run(main_async(home))
    finally:
        client.stop_runner(home, timeout=30)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
