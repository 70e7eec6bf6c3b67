"""The `app_server` fixture: a real `python -m tether serve` subprocess per module.

The conformance suite in ../shared runs against this file too (copied beside it), so it
must stay self-contained: it imports only the installed `tether` package and the
standard test tooling.

Tool calls outlive their server by default (the keeper, TETHER_KEEPER): a server's
graceful stop leaves its runner and the calls it runs, and a `kill -9` leaves them too.
So closing an `AppServer` also stops its home's runner and whatever its calls left, and
no test leaves a process behind. A run killed outright (SIGKILL, a CI time-out) cannot
close its servers: each server is recorded under `_REGISTRY` while it may run, and the
next run reaps what a run that is gone left there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

import tether
from tether.keeper import client as keeper_client
from tether.sandbox import enforcers

TEST_TOKEN = "integration-test-token"
_SRC = str(Path(tether.__file__).resolve().parent.parent)
#: One file per test server that may still run: who started it, its pid, its home.
_REGISTRY = Path(tempfile.gettempdir()) / "tether-test-servers"


def _started_at(pid: int) -> float | None:
    """The process's start time, or None if it is gone (with the pid, who it is)."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AppServer:
    """A Tether server in a subprocess, with its own TETHER_HOME."""

    def __init__(self, home: Path, extra_env: dict[str, str] | None = None) -> None:
        self.home = home
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.token = TEST_TOKEN
        self.extra_env = extra_env or {}
        self.log_path = home / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        #: The interpreter `tether serve` runs under (an upgrade test installs Tether
        #: into a venv of its own).
        self.python = sys.executable
        # Idle connections are dropped before the server drops them (uvicorn: after 5 s,
        # as httpx's default): with both at 5 s a request could go out on a connection
        # the server was closing, and meet "Server disconnected" (seen on a loaded run).
        self._client = httpx.Client(
            base_url=self.base_url, timeout=15.0, limits=httpx.Limits(keepalive_expiry=2.0)
        )

    def _env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TETHER_", "OPENAI_")) or k == "TETHER_TEST_TIMEOUT_SCALE"
        }
        env.update(
            TETHER_HOME=str(self.home),
            TETHER_TOKEN=self.token,
            TETHER_CANCEL_GRACE_SECONDS="1",
            PYTHONPATH=os.pathsep.join(filter(None, [_SRC, env.get("PYTHONPATH")])),
            PYTHONUNBUFFERED="1",
        )
        env.update(self._database_env())
        env.update(self.extra_env)
        return env

    def _database_env(self) -> dict[str, str]:
        # TETHER_TEST_DATABASE=postgresql: the same tests, each home's store in a
        # PostgreSQL database of its own (tests/database_support.py, not copied with the
        # conformance suite, which runs on SQLite).
        if os.environ.get("TETHER_TEST_DATABASE", "sqlite") == "sqlite":
            return {}
        from database_support import postgres_url

        return {"TETHER_DATABASE_URL": postgres_url(str(self.home.resolve()))}

    def start(self, timeout: float = 30.0) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [self.python, "-m", "tether", "serve", "--port", str(self.port)],
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self._record()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.logs_tail()}")
            try:
                if self._client.get("/api/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not healthy after {timeout}s:\n{self.logs_tail()}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        """SIGKILL the server (a crash)."""
        self.stop(signal.SIGKILL)

    def restart(self) -> None:
        self.stop()
        self.start()

    def api_request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        return self._client.request(method, path, headers=headers, **kwargs)

    def logs_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def close(self) -> None:
        """Stop the server, then what it leaves running on purpose (:meth:`reap`)."""
        self.stop()
        self.reap()
        self._client.close()
        self._record_path.unlink(missing_ok=True)

    def reap(self) -> None:
        """Stop what the home's calls left running (:func:`reap_home`). Call it only once
        no server runs on the home: the next start would adopt these calls."""
        reap_home(self.home)

    @property
    def _record_path(self) -> Path:
        return _REGISTRY / f"{os.getpid()}-{self.port}.json"

    def _record(self) -> None:
        assert self.proc is not None
        _REGISTRY.mkdir(exist_ok=True)
        entry = {
            "run": [os.getpid(), _started_at(os.getpid())],
            "server": [self.proc.pid, _started_at(self.proc.pid)],
            "home": str(self.home),
        }
        self._record_path.write_text(json.dumps(entry))


def reap_home(home: Path) -> None:
    """Stop the home's keeper runner (SIGTERM: it stops its calls' trees and exits),
    then kill any process still carrying the marker of one of the home's calls (the
    runner may have been killed, or not have stopped in time), then remove the limits
    groups the home's server and runner made (a killed one cannot)."""
    keeper_client.stop_runner(home)
    _kill_marked(home)
    for owner in (enforcers.home_tag(home), enforcers.runner_tag(home)):
        enforcers.choose(owner).close()


def _kill_marked(home: Path) -> None:
    markers = set()
    for spec in home.glob("calls/*/call.json"):
        try:
            markers.add(str(json.loads(spec.read_bytes())["marker"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    if not markers:
        return
    left = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TETHER_TOOL_CALL") in markers:
                left.append(proc)
        except psutil.Error:
            continue
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(left, timeout=5)


@pytest.fixture(scope="session", autouse=True)
def _reap_what_killed_runs_left() -> None:
    """Servers recorded by a test run that is gone (killed before it could close them):
    kill each one still running, then reap its home."""
    for path in _REGISTRY.glob("*.json"):
        try:
            entry = json.loads(path.read_text())
            (run, run_started), (server, server_started) = entry["run"], entry["server"]
            home = Path(entry["home"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _started_at(run) == run_started:
            continue  # that run is still going (another session's, say)
        if server_started is not None and _started_at(server) == server_started:
            with contextlib.suppress(psutil.Error):
                psutil.Process(server).kill()
                psutil.Process(server).wait(5)
        if home.is_dir():
            reap_home(home)
        path.unlink(missing_ok=True)


def start_server(home: Path, **extra_env: str) -> AppServer:
    server = AppServer(home, extra_env)
    server.start()
    return server


@pytest.fixture(scope="module")
def app_server() -> Iterator[AppServer]:
    home = Path(tempfile.mkdtemp(prefix="tether-it-"))
    server = start_server(home)
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(home, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too, so suites copied beside this file (the conformance suite)
    # run under --strict-markers without a pyproject of their own.
    for marker in ("integration", "browser", "p0", "p1", "p2"):
        config.addinivalue_line("markers", f"{marker}: see the project's pyproject")
