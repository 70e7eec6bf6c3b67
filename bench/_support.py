"""Shared pieces for the benchmarks: a real server subprocess, the fake model, figures.

Benchmarks are plain scripts (not tests). Each prints its results as JSON lines
``{"metric": ..., "value": ..., "unit": ..., "target": ..., "ok": ...}`` on stdout so
``run_all.py`` can collect them into one table.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
TOKEN = "bench-token"
MOCK_MODEL = "mock-model"


def _load_helpers() -> Any:
    # The fake model is the integration tests' MockLLMHandler (stdlib + openai only).
    path = ROOT / "tests" / "integration" / "helpers.py"
    spec = importlib.util.spec_from_file_location("tether_bench_helpers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


helpers = _load_helpers()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`python -m tether serve` in its own TETHER_HOME."""

    def __init__(self, **env: str) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="tether-bench-"))
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        # TETHER_KEEPER and TETHER_SANDBOX alone pass through, so a script can measure
        # either mode: `TETHER_KEEPER=0 python bench/bench_chat.py` runs calls as the
        # server's children, `TETHER_SANDBOX=off` without bwrap.
        passed = ("TETHER_KEEPER", "TETHER_SANDBOX")
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("TETHER_", "OPENAI_")) or k in passed
            },
            "TETHER_HOME": str(self.home),
            "TETHER_TOKEN": TOKEN,
            "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
            "TETHER_LLM_MAX_RETRIES": "0",
            "TETHER_LOG_LEVEL": "warning",
            "PYTHONPATH": str(SRC),
            **env,
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.client = httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    def start(self) -> float:
        """Start and wait until /api/healthz answers; returns the seconds it took."""
        log = (self.home / "server.log").open("ab")
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tether", "serve", "--port", str(self.port)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError((self.home / "server.log").read_text()[-3000:])
            try:
                if self.client.get("/api/healthz", timeout=0.5).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.005)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self) -> None:
        self.stop()
        # Under the keeper (the default) a stop leaves the runner while calls still run:
        # stop it, and them, before the home goes.
        from tether.keeper import client

        client.stop_runner(self.home)
        self.client.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def command_starts(self, argv: Sequence[str]) -> list[float]:
        """Start times (epoch seconds) of the processes that run exactly ``argv`` under
        this server or its home's runner: a call listed `running` may still wait for its
        process. Their own start times, so a caller polling slowly measures no later."""
        import psutil

        from tether.keeper import client

        runner = client.recorded_runner(self.home)
        roots = [p for p in (self.proc and self.proc.pid, runner and runner.pid) if p]
        starts = []
        for pid in roots:
            try:
                descendants = psutil.Process(pid).children(recursive=True)
            except psutil.Error:
                continue
            for proc in descendants:
                try:
                    if proc.cmdline() == list(argv):
                        starts.append(proc.create_time())
                except psutil.Error:
                    continue
        return starts

    def register(self, model: FakeModel) -> None:
        """Make the fake model the active provider."""
        provider = {
            "id": "bench",
            "name": "Bench fake",
            "default_base_url": model.url,
            "models": [{"id": MOCK_MODEL, "name": MOCK_MODEL}],
        }
        self.client.post("/api/models/custom-providers", json=provider).raise_for_status()
        self.client.put("/api/models/bench/config", json={"api_key": "x"}).raise_for_status()
        active = {"provider_id": "bench", "model": MOCK_MODEL, "scope": "global"}
        self.client.put("/api/models/active", json=active).raise_for_status()


class KeptAliveModelHandler(helpers.MockLLMHandler):
    """The tests' fake model, keeping a connection open between requests as hosted
    providers do (HTTP/1.1; every answer has a Content-Length). The tests' handler closes
    it after each request, which made a turn pay two connects no real provider costs."""

    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes: on a kept-alive connection, Nagle's
    # algorithm held the body back for the client's delayed ACK (about 40 ms a request).
    disable_nagle_algorithm = True


class FakeModel:
    """The zero-latency fake model on its own thread (a thread per connection)."""

    def __init__(self) -> None:
        self.srv: Any = helpers.ModelHTTPServer(("127.0.0.1", 0), KeptAliveModelHandler)
        self.srv.requests = []
        self.srv.replies = []
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/v1"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def script(self, *replies: dict[str, Any]) -> None:
        self.srv.replies = list(replies)

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def shell_reply(*commands: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            ("execute_shell_command", json.dumps({"command": c, "timeout": 600})) for c in commands
        ]
    }


def chat_body(text: str, session_id: str) -> dict[str, Any]:
    return {"session_id": session_id, "input": [{"content": [{"type": "text", "text": text}]}]}


def wait_until(probe: Callable[[], Any], timeout: float = 30.0, step: float = 0.001) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(step)
    raise TimeoutError("benchmark precondition not reached")


def pct(samples: Sequence[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def load_note() -> str:
    """The machine's 1-minute load average, to print beside a figure taken on a machine
    that other people's test runs share."""
    return f"load {os.getloadavg()[0]:.1f}"


def report(metric: str, value: float, unit: str, target: str, ok: bool, note: str = "") -> None:
    """Print one result line for run_all.py (and a person)."""
    line = {"metric": metric, "value": round(value, 2), "unit": unit, "target": target, "ok": ok}
    if note:
        line["note"] = note
    print(json.dumps(line), flush=True)
