"""A stdio MCP server runs inside the shell calls' sandbox: it cannot write outside the
workspace, read Tether's state or reach the network unless its client allows it, it has
its own pid namespace and runs under its limits group; a client may opt out."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from core_support import Stack, new_session, stack_for_module, temporary_server, wait_for
from mcp_support import FIXTURE, add_client, mcp_call, remove_client, state_dir, stdio_client

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="bubblewrap is not installed (scripts/ensure-bubblewrap)",
    ),
]

PLANTED = "planted-secret-of-tether-home"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # bwrap is required here: the server refuses to start rather than run unsandboxed.
    yield from stack_for_module("mcp-sandbox", TETHER_SANDBOX="bwrap")


@pytest.fixture()
def state(stack: Stack) -> Iterator[Path]:
    yield from state_dir(stack)


@pytest.fixture()
def outside() -> Iterator[Path]:
    """A directory the test (outside the sandbox) can write to: not /tmp, which the
    sandbox replaces with its own, and not in TETHER_HOME."""
    path = Path(tempfile.mkdtemp(prefix="tether-mcp-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture()
def listener() -> Iterator[int]:
    """A loopback port that accepts connections (from the host's network namespace)."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield int(sock.getsockname()[1])


@pytest.fixture()
def unix_listener(outside: Path) -> Iterator[Path]:
    """A unix socket at a path the sandbox can see (read-only), accepting connections."""
    path = outside / "service.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        sock.listen()
        yield path


@pytest.fixture()
def secret_file(stack: Stack) -> Path:
    """A file in TETHER_HOME (beside the database and key file) the server must not see."""
    path = stack.server.home / "planted-secret"
    path.write_text(PLANTED)
    return path


@dataclass(frozen=True)
class Boundary:
    """What a probe reaches for beyond the workspace."""

    outside: Path
    port: int
    unix: Path
    secret: Path


@pytest.fixture()
def boundary(outside: Path, listener: int, unix_listener: Path, secret_file: Path) -> Boundary:
    return Boundary(outside, listener, unix_listener, secret_file)


def probe(
    stack: Stack, key: str, write_to: Path, read_from: Path, port: int, unix: Path | None = None
) -> dict[str, str]:
    """What the server's ``probe_boundary`` tool saw, called through a real turn."""
    session = new_session()
    arguments: dict[str, Any] = {
        "write_to": str(write_to),
        "read_from": str(read_from),
        "connect_port": port,
    }
    if unix is not None:
        arguments["connect_unix"] = str(unix)
    stack.model.script(mcp_call(key, "probe_boundary", **arguments), {"text": "probed"})
    task = stack.wait_task(stack.submit("probe", session))
    said = [m["content"] for m in task["messages"] if m["role"] == "tool"][-1]
    return dict(json.loads(str(said)[str(said).index("{") :].split("\n")[0]))


def server_process(state: Path) -> psutil.Process:
    """The fixture server's real process (the one whose argv names this state dir)."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if FIXTURE in cmdline and str(state) in cmdline and "bwrap" not in cmdline[0]:
            return proc
    raise AssertionError(f"no fixture server process for {state}")


def test_a_sandboxed_server_writes_only_the_workspace_and_sees_no_secret_or_network(
    stack: Stack, state: Path, boundary: Boundary
) -> None:
    info = add_client(stack, "boxed", stdio_client(state))
    escaped = boundary.outside / "escaped"
    try:
        assert info["sandboxed"] is True
        said = probe(stack, "boxed", escaped, boundary.secret, boundary.port, boundary.unix)
        assert said["write"].startswith("OSError"), said
        assert not escaped.exists()
        assert PLANTED not in said["read"] and said["read"].startswith("FileNotFoundError")
        assert said["connect"] != "ok", said
        # No network, no local service's socket either (the system call filter).
        assert said["unix"] == "PermissionError: Operation not permitted", said
        # Its own pid namespace: bwrap's init is pid 1 there, the server right after it.
        assert int(said["pid"]) < 10
        # The workspace is writable, and what is written there is the real workspace.
        inside = probe(stack, "boxed", state / "inside", state / "starts", boundary.port)
        assert inside["write"] == "ok" and (state / "inside").exists()
        _assert_under_limits(stack, server_process(state))
    finally:
        remove_client(stack, "boxed")


def test_a_client_may_allow_the_network_or_run_its_server_outside(
    stack: Stack, state: Path, boundary: Boundary
) -> None:
    networked = add_client(stack, "netboxed", stdio_client(state, sandbox_network="full"))
    escaped, written = boundary.outside / "escaped", boundary.outside / "written"
    try:
        assert networked["sandboxed"] is True and networked["sandbox_network"] == "full"
        said = probe(stack, "netboxed", escaped, boundary.secret, boundary.port, boundary.unix)
        assert said["connect"] == "ok" and said["write"].startswith("OSError"), said
        assert said["unix"] == "ok", said
    finally:
        remove_client(stack, "netboxed")
    free = add_client(stack, "unboxed", stdio_client(state, sandbox=False))
    try:
        assert free["sandboxed"] is False
        said = probe(stack, "unboxed", written, boundary.secret, boundary.port)
        assert said["write"] == "ok" and written.exists()
    finally:
        remove_client(stack, "unboxed")


def test_an_update_can_turn_the_sandbox_off_and_back_to_the_default_network(
    stack: Stack, state: Path
) -> None:
    add_client(stack, "toggled", stdio_client(state, sandbox_network="full"))
    try:
        changed = stack.api("PUT", "/api/mcp/toggled", json={"sandbox_network": None})
        assert changed.status_code == 200, changed.text
        assert changed.json()["sandbox_network"] is None
        bad = stack.api("PUT", "/api/mcp/toggled", json={"sandbox_network": "some"})
        assert bad.status_code == 422 and "sandbox_network" in bad.text
    finally:
        remove_client(stack, "toggled")


def test_a_sandboxed_server_dies_with_tether_even_if_it_ignores_its_closed_stdin() -> None:
    # Not an MCP server at all: it never answers, and a closed stdin does not end it.
    linger = "987.25"
    spec = {"name": "lingering", "command": "sh", "args": ["-c", f"sleep {linger}; :"]}
    with temporary_server("mcp-sandbox-crash", TETHER_SANDBOX="bwrap") as server:
        resp = server.api_request("POST", "/api/mcp", json={"client_key": "linger", "client": spec})
        assert resp.status_code == 201, resp.text

        def sleeper() -> psutil.Process | None:
            for proc in psutil.process_iter(["cmdline"]):
                if proc.info["cmdline"] == ["sleep", linger]:
                    return proc
            return None

        proc = wait_for(sleeper, what="the server's process in the sandbox")
        try:
            server.kill()
            wait_for(
                lambda: not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE,
                10,
                "the sandboxed server to die with Tether",
            )
        finally:
            with contextlib.suppress(psutil.Error):
                proc.kill()  # only when the test failed


def _assert_under_limits(stack: Stack, proc: psutil.Process) -> None:
    """The server runs in a limits group of its own (cgroup), or under the rlimits."""
    mechanism = stack.api("GET", "/api/healthz").json()["limits"]
    if mechanism == "rlimit":
        soft, _hard = proc.rlimit(psutil.RLIMIT_AS)
        assert soft == 2048 * 1024 * 1024
        return
    groups: dict[str, Any] = {}
    for line in Path(f"/proc/{proc.pid}/cgroup").read_text().splitlines():
        _n, controllers, path = line.split(":", 2)
        groups[controllers] = path
    assert any("/call-" in path for path in groups.values()), groups
