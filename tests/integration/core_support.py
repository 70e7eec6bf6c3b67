"""Shared pieces for the core integration tests: a server wired to the fake model, task
and tool-call helpers, and the strict role-order check applied to every model request."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil
from helpers import (
    MockLLMHandler,
    ModelHTTPServer,
    default_http_timeout,
    register_mock_provider,
)

from strict_order import request_problems
from tether.toolcalls.launcher import MARKER_VAR


def _load_harness() -> Any:
    # The harness lives in this directory's conftest.py. "import conftest" would pick up
    # whichever conftest pytest imported last (tests/unit/... has its own), so load this
    # one by path under a name of its own.
    name = "tether_integration_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("conftest.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_harness = _load_harness()
AppServer = _harness.AppServer
start_server = _harness.start_server
free_port = _harness.free_port

SHELL = "execute_shell_command"
T = TypeVar("T")


def scaled(seconds: float) -> float:
    """A window a test gives the server (a deadline, an expiry), widened by
    TETHER_TEST_TIMEOUT_SCALE on a slow machine. Windows a loaded machine could miss
    are a few seconds at least: this only stretches them further."""
    return default_http_timeout(seconds)


def wait_for(probe: Callable[[], T | None], timeout: float = 15.0, what: str = "it") -> T:
    """Poll ``probe`` until it returns something truthy (never a bare sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class FakeModel:
    """The wire-level fake model (MockLLMHandler) on a thread of its own."""

    def __init__(self) -> None:
        self.srv: Any = ModelHTTPServer(("127.0.0.1", 0), MockLLMHandler)
        self.srv.force_error = False
        self.srv.force_tool_call = False
        self.srv.requests = []
        self.srv.replies = []
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/v1"
        self._checked = 0
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def script(self, *replies: dict[str, Any]) -> None:
        self.srv.replies = list(replies)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return list(self.srv.requests)

    def assert_valid(self) -> None:
        """Every request so far is one a strict provider accepts."""
        for body in self.requests:
            problems = request_problems(body["messages"], sent=True)
            assert not problems, (problems, body["messages"])

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def home_database(home: Path) -> dict[str, str]:
    """The setting that keeps a server's database in its home, as SQLite, whatever the
    run is on: for the tests about what the home's own files go through (a disk that
    fills, modes lost, a schema killed half-made), which the PostgreSQL pass would
    otherwise pass without testing or fail on a file that is not there."""
    return {"TETHER_DATABASE_URL": f"sqlite+aiosqlite:///{home / 'tether.db'}"}


def shell_call(command: str, **extra: Any) -> dict[str, Any]:
    """A scripted model reply calling the shell tool once."""
    return {"tool_calls": [(SHELL, json.dumps({"command": command, **extra}))]}


def new_session() -> str:
    return f"console:it-{uuid.uuid4().hex[:10]}"


def chat_body(text: str, session_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "input": [{"role": "user", "type": "message", "content": [{"type": "text", "text": text}]}],
        **extra,
    }


@dataclass
class Stack:
    """A real server, its fake model, and the calls tests make of both."""

    server: Any
    model: FakeModel

    @property
    def workspace(self) -> Path:
        return self.server.home / "workspace"

    def api(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.server.api_request(method, path, **kwargs)

    def submit(self, text: str, session_id: str) -> str:
        resp = self.api("POST", "/api/console/chat/task", json=chat_body(text, session_id))
        assert resp.status_code == 200, resp.text
        return str(resp.json()["task_id"])

    def task(self, task_id: str) -> dict[str, Any]:
        resp = self.api("GET", f"/api/console/chat/task/{task_id}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    def wait_task(self, task_id: str, timeout: float = 20.0) -> dict[str, Any]:
        """The task once finished."""
        return wait_for(
            lambda: (t := self.task(task_id))["status"] == "finished" and t,
            timeout,
            f"task {task_id} to finish",
        )

    def live_calls(self, session_id: str) -> list[dict[str, Any]]:
        resp = self.api("GET", f"/api/tool-calls/{session_id}")
        assert resp.status_code == 200, resp.text
        return list(resp.json()["items"])

    def call(self, session_id: str, call_id: str) -> dict[str, Any]:
        resp = self.api("GET", f"/api/tool-calls/{session_id}/{call_id}")
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    def wait_call(self, session_id: str, timeout: float = 15.0) -> dict[str, Any]:
        """The first call in flight in the session, once there is one."""
        calls = wait_for(lambda: self.live_calls(session_id), timeout, "a call in flight")
        return calls[0]

    def wait_completed(
        self, session_id: str, call_id: str, timeout: float = 15.0
    ) -> dict[str, Any]:
        return wait_for(
            lambda: (c := self.call(session_id, call_id))["status"] == "completed" and c,
            timeout,
            f"call {call_id} to complete",
        )

    def start_shell(
        self, command: str, session_id: str | None = None, **extra: Any
    ) -> tuple[str, str, dict[str, Any]]:
        """Have the model run one shell command (in a new session unless given) and answer
        "done" after. Returns (session id, task id, the call as first listed)."""
        session_id = session_id or new_session()
        self.model.script(shell_call(command, **extra), {"text": "done"})
        task_id = self.submit("run it", session_id)
        return session_id, task_id, self.wait_call(session_id)

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        resp = self.api("GET", f"/api/chats/{session_id}/messages")
        assert resp.status_code == 200, resp.text
        return list(resp.json())


@contextmanager
def temporary_server(prefix: str, **env: str) -> Iterator[Any]:
    """A server in a fresh home, stopped and removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix=f"tether-{prefix}-"))
    server = start_server(home, **env)
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(home, ignore_errors=True)


def stack_for_module(prefix: str, **env: str) -> Iterator[Stack]:
    """Body of a module-scoped fixture: a fresh server home, the fake model registered."""
    model = FakeModel()
    # Governance is off: these tests are about the core, not about which calls may run.
    defaults = {"TETHER_LLM_MAX_RETRIES": "0", "TETHER_DEFAULT_APPROVAL_LEVEL": "off"}
    try:
        with temporary_server(prefix, **{**defaults, **env}) as server:
            register_mock_provider(server, model.url)
            yield Stack(server, model)
    finally:
        model.close()


def keeper_stack(prefix: str, **env: str) -> Iterator[Stack]:
    """:func:`stack_for_module` with the keeper on, said explicitly (it is the default)
    for the tests that are about it; closing the server stops its runner, with whatever
    it still runs (see conftest's ``AppServer.reap``)."""
    yield from stack_for_module(prefix, TETHER_KEEPER="1", TETHER_CANCEL_GRACE_SECONDS="0.3", **env)


def tether_status(stack: Stack) -> str:
    """`tether status` run as the operator would, on the server's home (up or not)."""
    done = run_tether_status(stack.server._env())
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_tether_status(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`tether status` with ``env``, whatever it exits with."""
    return subprocess.run(
        [sys.executable, "-m", "tether", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@dataclass(frozen=True)
class SseEvent:
    id: int | None
    data: dict[str, Any]


def sse_events(lines: Iterator[str]) -> Iterator[SseEvent]:
    """Parse SSE frames from a line iterator (``response.iter_lines()``)."""
    event_id: int | None = None
    data: list[str] = []
    for line in lines:
        if line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield SseEvent(event_id, json.loads("\n".join(data)))
            event_id, data = None, []


def gated(name: str, before: str = "", after: str = "") -> str:
    """A shell command that runs ``before``, waits until the file ``name`` exists in its
    working directory (the test creates it with :func:`open_gate`), then runs ``after``."""
    return f"{before}; while [ ! -e {name} ]; do sleep 0.02; done; {after}"


def open_gate(stack: Stack, name: str) -> None:
    (stack.workspace / name).touch()


def orphaning_command(workdir: str, then: str = "sleep 300") -> str:
    """A command, run in ``workdir`` (under the workspace), that leaves a truly orphaned
    descendant: a subshell starts a setsid'd ``sleep`` and exits at once, so the sleep is
    nobody's descendant in the call's tree, in a session and process group of its own;
    only the marker in its environment ties it to the call. It writes the call shell's
    pid to shell.pid and its own to orphan.pid, then the shell runs ``then``."""
    orphan = "(setsid sh -c 'echo $$ > orphan.pid; exec sleep 300' &)"
    return f"cd {workdir} && echo $$ > shell.pid && {orphan}; {then}"


def orphan_pid(directory: Path) -> int:
    """The pid of the orphan :func:`orphaning_command` left, once it really is one."""

    def ready() -> int | None:
        try:
            shell = psutil.Process(int((directory / "shell.pid").read_text()))
            orphan = psutil.Process(int((directory / "orphan.pid").read_text()))
            if orphan.name() != "sleep":  # still the setsid'd shell, before its exec
                return None
        except (FileNotFoundError, ValueError, psutil.NoSuchProcess):
            return None
        assert orphan.pid not in {p.pid for p in shell.children(recursive=True)}
        assert os.getsid(orphan.pid) != os.getsid(shell.pid)
        assert os.getpgid(orphan.pid) != os.getpgid(shell.pid)
        return orphan.pid

    return wait_for(ready, what="the orphaned setsid'd process")


def marked(call_id: str) -> list[int]:
    """Pids of the processes carrying the marker of ``call_id``, whichever server started
    them (the marker in their environment ends with the call id)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARKER_VAR, "").endswith(f":{call_id}"):
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def process_gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def refused_start(home: Path, *options: str, **env: str) -> str:
    """Run ``tether serve`` with ``options`` and ``env`` (and no other TETHER_ variable),
    expect it to refuse to start, and return what it said on stderr."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    done = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--port", "0", *options],
        env={**clean, "TETHER_HOME": str(home), **env},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0, done.stderr.decode()
    return done.stderr.decode()
