"""Load a GET route with N keep-alive connections: wrk when installed, else a small
asyncio client (raw HTTP/1.1 over asyncio streams, so the client costs little; it still
shares the machine's two cores with the server, so it reads low)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from dataclasses import dataclass

from _support import TOKEN, pct


@dataclass(frozen=True)
class Load:
    rps: float
    p50_ms: float
    p99_ms: float
    tool: str


def run(port: int, path: str, seconds: float = 5.0, connections: int = 8) -> Load:
    if shutil.which("wrk"):
        return _wrk(port, path, seconds, connections)
    return asyncio.run(_python(port, path, seconds, connections))


def _wrk(port: int, path: str, seconds: float, connections: int) -> Load:
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds:g}s",
            "--latency",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            f"http://127.0.0.1:{port}{path}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    if "Non-2xx" in out:
        raise RuntimeError(out)
    return Load(rps, _wrk_ms(out, "50%"), _wrk_ms(out, "99%"), "wrk")


def _wrk_ms(out: str, label: str) -> float:
    value, unit = re.search(rf"{label}\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


async def _python(port: int, path: str, seconds: float, connections: int) -> Load:
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    ).encode()
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))  # type: ignore[union-attr]
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - t0)
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    elapsed = time.perf_counter() - started
    ms = [x * 1000 for x in latencies]
    return Load(len(ms) / elapsed, pct(ms, 50), pct(ms, 99), "python-asyncio")
