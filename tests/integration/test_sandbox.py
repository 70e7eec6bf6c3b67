"""The sandbox under shell calls, through the real agent and real bwrap, at approval
level ``off`` so that the guard never hides the boundary. Every case that takes the
``stack`` runs twice: with calls as the server's children (TETHER_KEEPER=0), and under
the keeper's runner (TETHER_KEEPER=1, the default), where the runner applies and
measures the limits."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from core_support import (
    FakeModel,
    Stack,
    gated,
    keeper_stack,
    new_session,
    open_gate,
    refused_start,
    shell_call,
    stack_for_module,
    temporary_server,
    wait_for,
)
from governance_support import decide, first_pending
from helpers import register_mock_provider

from tether.keeper import client, layout

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (scripts/ensure-bubblewrap)"
)


QUIET = {"TETHER_LLM_MAX_RETRIES": "0", "TETHER_DEFAULT_APPROVAL_LEVEL": "off"}


@pytest.fixture(scope="module", params=["local", "keeper"])
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    if request.param == "keeper":
        yield from keeper_stack("sandbox-keeper")
    else:
        # Calls as the server's children: the keeper is the default, so said explicitly.
        yield from stack_for_module("sandbox", TETHER_KEEPER="0")


@pytest.fixture
def keeper(stack: Stack) -> Stack:
    """The stack, for the cases that only the keeper has."""
    if stack.server.extra_env.get("TETHER_KEEPER") != "1":
        pytest.skip("a keeper case")
    return stack


def run(stack: Stack, command: str, session: str | None = None, **extra: Any) -> dict[str, Any]:
    """Run one shell call to its end: (what the model was told, the call's detail)."""
    session = session or new_session()
    stack.model.script(shell_call(command, **extra), {"text": "done"})
    task = stack.wait_task(stack.submit("run it", session), timeout=60)
    message = [m for m in task["messages"] if m["role"] == "tool"][-1]
    return {"told": message["content"], **stack.call(session, message["x_tether_call_id"])}


def settings(stack: Stack, session: str, **values: Any) -> None:
    resp = stack.api("PUT", f"/api/chats/{session}/settings", json=values)
    assert resp.status_code == 200, resp.text


def session_with(stack: Stack, **values: Any) -> str:
    """A session that exists (one short turn) with ``values`` as its settings."""
    session = new_session()
    stack.model.script({"text": "hello"})
    stack.wait_task(stack.submit("hi", session))
    settings(stack, session, **values)
    return session


@pytest.fixture
def victim() -> Iterator[Path]:
    """A directory outside the workspace and outside /tmp (the sandbox's /tmp is its own)."""
    directory = Path(tempfile.mkdtemp(prefix="tether-victim-", dir="/var/tmp"))
    (directory / "keep").write_text("precious")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_health_says_the_sandbox_and_the_limits_mechanism(stack: Stack) -> None:
    health = stack.api("GET", "/api/healthz").json()
    assert health["sandbox"] == "bwrap"
    assert health["syscall_filter"] is True
    assert health["limits"] in ("cgroup2", "cgroup1", "rlimit")


@pytest.mark.parametrize(
    "template",
    [
        "rm -f {keep}; echo new > {dir}/new",
        "python3 -c \"import subprocess; subprocess.run(['rm', '-f', '{keep}'])\"",
        "perl -e 'unlink(q({keep})) or die qq(perl: $!\\n)'",
    ],
    ids=["shell", "python-subprocess", "perl"],
)
def test_writes_outside_the_workspace_fail_read_only(
    stack: Stack, victim: Path, template: str
) -> None:
    result = run(stack, template.format(keep=victim / "keep", dir=victim))
    assert (victim / "keep").read_text() == "precious"
    assert not (victim / "new").exists()
    assert "Read-only file system" in result["told"]
    # The workspace itself stays writable.
    marker = f"w-{uuid.uuid4().hex[:8]}"
    assert run(stack, f"echo ok > {marker}")["end_state"] == "success"
    assert (stack.workspace / marker).read_text() == "ok\n"


def test_kernel_settings_cannot_be_written(stack: Stack) -> None:
    """The server runs as root here: a call keeps uid 0 (its capabilities dropped), and
    /proc/sys's files are root's, so only a read-only mount stops it writing them
    (kernel.core_pattern names a program the kernel runs as root outside every
    namespace). Opening for writing is enough to tell; nothing is written."""
    opener = "import os, sys; os.close(os.open(sys.argv[1], os.O_WRONLY)); print('opened')"
    for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches"):
        result = run(stack, f'python3 -c "{opener}" {path}')
        assert "opened" not in result["told"]
        if os.geteuid() == 0:
            assert "Read-only file system" in result["told"]


def test_tether_home_is_hidden(stack: Stack) -> None:
    home = stack.server.home
    # A file of Tether's own state that exists whatever the database (the token comes from
    # the environment in tests, and on PostgreSQL there is no tether.db).
    planted = "planted-state-" + stack.server.token[:8]
    (home / "state.txt").write_text(planted)
    # The path is built at run time, so the guard (which refuses TETHER_HOME paths it
    # can see) lets it through: the sandbox must hold on its own.
    result = run(stack, 'H=$(dirname "$PWD"); cat $H/state.txt $H/token $H/tether.db; ls -A $H')
    assert planted not in result["told"]
    assert stack.server.token not in result["told"]
    assert "SQLite format" not in result["told"]
    assert "No such file or directory" in result["told"]
    # Only the workspace is left of TETHER_HOME.
    listing = result["told"].split("\n")
    assert "workspace" in listing
    assert not {"state.txt", "token", "tether.db"} & set(listing)


@contextmanager
def _answering_pong(srv: socket.socket) -> Iterator[None]:
    """Answer "pong" to each connection to the listening ``srv`` until the block ends."""

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"pong")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        srv.shutdown(socket.SHUT_RDWR)  # ends the accept the thread waits in
        srv.close()
        thread.join(5)


@pytest.fixture
def tcp_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers "pong" to each connection."""
    srv = socket.create_server(("127.0.0.1", 0))
    with _answering_pong(srv):
        yield int(srv.getsockname()[1])


def _connect(port: int) -> str:
    return (
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', "
        f"{port}), 3); print('got', s.recv(4).decode())\""
    )


def test_network_none_cannot_reach_loopback_and_full_can(stack: Stack, tcp_server: int) -> None:
    closed = session_with(stack, network="none")
    result = run(stack, _connect(tcp_server), closed)
    assert "got pong" not in result["told"]
    assert result["end_state"] == "error"
    opened = session_with(stack, network="full")
    assert "got pong" in run(stack, _connect(tcp_server), opened)["told"]
    # Asking for the network in a `none` session is an escalation, which `off` runs.
    assert "got pong" in run(stack, _connect(tcp_server), closed, network=True)["told"]


@pytest.fixture(params=["/run", "/var/tmp"])
def unix_server(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A unix socket answering "pong": under /run, where services keep theirs (covered
    by an empty /run), or anywhere else the call can see (refused by the syscall filter)."""
    path = Path(request.param) / f"tether-test-{uuid.uuid4().hex[:8]}.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen()
    try:
        with _answering_pong(srv):
            yield path
    finally:
        path.unlink()


def test_network_none_cannot_reach_a_local_services_socket(stack: Stack, unix_server: Path) -> None:
    connect = (
        'python3 -c "import socket; s = socket.socket(socket.AF_UNIX); '
        f"s.connect('{unix_server}'); print('got', s.recv(4).decode())\""
    )
    closed = session_with(stack, network="none")
    assert "got pong" not in run(stack, connect, closed)["told"]
    opened = session_with(stack, network="full")
    assert "got pong" in run(stack, connect, opened)["told"]


# System calls by number through libc's syscall(): what a hostile call would do.
_SYSCALL = (
    'python3 -c "import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); '
    "r = libc.syscall({number}, 0, 0, 0); print('result', r, os.strerror(ctypes.get_errno()))\""
)
_KEYCTL = {"x86_64": 250, "aarch64": 219}
_IO_URING_SETUP = 425  # the same on both


def test_a_call_cannot_use_the_kernel_keyring_io_uring_or_another_abi(stack: Stack) -> None:
    """Keys are not namespaced: a call could read or plant its user's keys outside the
    sandbox. Another ABI's system calls have other numbers, past any filter written for
    this one: a process making one is killed."""
    machine = os.uname().machine
    if machine not in _KEYCTL:
        pytest.skip(f"no syscall filter table for {machine}")
    # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING) without the filter works.
    keyctl = _SYSCALL.format(number=_KEYCTL[machine]).replace("0, 0, 0", "0, -3, 1")
    said = run(stack, keyctl)["told"]
    assert "result -1 Operation not permitted" in said, said
    # io_uring_setup(0, NULL): EINVAL or EFAULT without the filter. A ring's operations
    # pass no filter: it could make the unix socket refused with the network off.
    said = run(stack, _SYSCALL.format(number=_IO_URING_SETUP))["told"]
    assert "result -1 Operation not permitted" in said, said
    if machine == "x86_64":
        x32_getpid = _SYSCALL.format(number=0x40000000 + 39)
        result = run(stack, x32_getpid)
        assert "result" not in result["told"], result["told"]
        assert "SIGSYS" in result["told"] or "exit code 159" in result["told"], result["told"]
        # -1 is no system call at all, not another ABI's: ENOSYS, as without the filter.
        said = run(stack, _SYSCALL.format(number=-1))["told"]
        assert "result -1 Function not implemented" in said, said


_UNSHARE = {"x86_64": 272, "aarch64": 97}
_CLONE3 = 435  # the same on both
# Makes a user namespace (and a cgroup and a mount namespace in it), then mounts a fresh
# cgroup2 hierarchy: where that works, every v2 group the call's own is an ancestor of
# (on cgroup v1 machines, the whole v2 tree) has a writable ``cgroup.kill``.
_CGROUP2_IN_A_USER_NAMESPACE = (
    'python3 -c "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); '
    "r = libc.syscall({number}, 0x10000000 | 0x20000 | 0x02000000); "
    "print('unshare', r, os.strerror(ctypes.get_errno())); os.makedirs('/tmp/cg'); "
    "r = libc.mount(b'none', b'/tmp/cg', b'cgroup2', 0, None); "
    "print('mount', r, os.strerror(ctypes.get_errno()))\""
)


def test_a_call_cannot_make_a_user_namespace(stack: Stack) -> None:
    """In a user namespace of its own a call holds every capability again: a review
    mounted a fresh cgroup2 there and killed a process outside the sandbox through
    ``cgroup.kill``. Threads and children (libc falls back from clone3) still work."""
    machine = os.uname().machine
    if machine not in _UNSHARE:
        pytest.skip(f"no syscall filter table for {machine}")
    said = run(stack, _CGROUP2_IN_A_USER_NAMESPACE.format(number=_UNSHARE[machine]))["told"]
    assert "unshare -1 Operation not permitted" in said, said
    assert "mount 0" not in said, said
    said = run(stack, "unshare --user --map-current-user id")["told"]
    assert "uid=" not in said, said
    # clone3's flags are out of a filter's reach: ENOSYS, so libc uses clone instead.
    said = run(stack, _SYSCALL.format(number=_CLONE3))["told"]
    assert "result -1 Function not implemented" in said, said
    threads = (
        'python3 -c "import threading, subprocess; t = threading.Thread(target=print, '
        "args=('thread',)); t.start(); t.join(); subprocess.run(['echo', 'child'])\""
    )
    said = run(stack, threads)["told"]
    assert "thread" in said and "child" in said, said


def test_a_call_cannot_leave_a_set_id_program_behind(stack: Stack) -> None:
    """The workspace outlives the call: a set-user-ID copy of a shell left there by a
    call run as root (a container's bind mount of a host directory, say) was a root
    shell for whoever reaches it. Plain modes still change."""
    if os.uname().machine not in _UNSHARE:
        pytest.skip(f"no syscall filter table for {os.uname().machine}")
    said = run(
        stack,
        "cp /bin/sh ./set-id-sh; chmod 4755 ./set-id-sh; chmod g+s ./set-id-sh; "
        "python3 -c \"import os; os.mknod('set-id-node', 0o104755)\"; "
        "chmod 700 ./set-id-sh && stat -c 'mode %a' ./set-id-sh",
    )["told"]
    assert said.count("Operation not permitted") == 3, said
    assert "mode 700" in said, said
    assert not (stack.workspace / "set-id-node").exists()
    assert (stack.workspace / "set-id-sh").stat().st_mode & 0o6000 == 0
    (stack.workspace / "set-id-sh").unlink()


def test_a_call_cannot_see_or_signal_the_server(stack: Stack) -> None:
    assert stack.server.proc is not None
    server = stack.server.proc.pid
    result = run(
        stack,
        f"test -e /proc/{server} && echo server-visible; kill -0 {server} && echo signalled; "
        "echo processes: $(ls /proc | grep -c '^[0-9]')",
    )
    assert "server-visible" not in result["told"]
    assert "signalled" not in result["told"]
    assert "No such process" in result["told"]
    assert stack.api("GET", "/api/healthz").status_code == 200


def test_a_fork_bomb_ends_on_the_process_limit(stack: Stack) -> None:
    session = session_with(stack, max_processes=64)
    # Written so that the guard does not recognise it: the limit must hold on its own.
    result = run(stack, "perl -e 'fork while 1'", session, timeout=60)
    assert result["resources"] is not None, result
    assert result["resources"]["killed_by"] == "processes"
    assert "stopped: process limit 64 reached" in result["told"]
    assert result["resources"]["processes_peak"] >= 32
    # The server stayed healthy and still runs calls.
    assert stack.api("GET", "/api/healthz").status_code == 200
    assert "alive" in run(stack, "echo alive")["told"]


def test_memory_over_the_limit_ends_the_call(stack: Stack) -> None:
    session = session_with(stack, memory_mb=256)
    result = run(stack, "python3 -c \"b = b'x' * (1024 ** 3); print(len(b))\"", session)
    assert result["resources"]["killed_by"] == "memory"
    assert "stopped: memory limit 256 MB reached" in result["told"]
    assert result["resources"]["peak_memory_bytes"] >= 200 * 1024 * 1024


def test_cpu_time_over_the_limit_ends_the_call(stack: Stack) -> None:
    session = session_with(stack, cpu_seconds=2)
    result = run(stack, 'python3 -c "while True: pass"', session, timeout=60)
    assert result["resources"]["killed_by"] == "cpu"
    assert "stopped: CPU time limit 2 s reached" in result["told"]
    assert 2 <= result["resources"]["cpu_seconds"] < 10


def test_an_ordinary_call_reports_what_it_used(stack: Stack) -> None:
    result = run(stack, 'python3 -c "print(sum(range(10**6)))"')
    resources = result["resources"]
    assert resources["killed_by"] is None
    assert resources["peak_memory_bytes"] > 0 and resources["processes_peak"] >= 1
    assert resources["cpu_seconds"] is not None and resources["cpu_seconds"] > 0


def test_cancel_is_recorded_as_killed_by_cancel(stack: Stack) -> None:
    session, _task, call = stack.start_shell("echo up; sleep 300")
    output = f"/api/tool-calls/{session}/{call['tool_call_id']}/output"
    # Cancel once it runs (a call stopped before its process exists used nothing).
    wait_for(lambda: "up" in stack.api("GET", output).text, what="the command to start")
    resp = stack.api("POST", f"/api/tool-calls/{session}/{call['tool_call_id']}/cancel", json={})
    assert resp.status_code == 202
    info = stack.wait_completed(session, call["tool_call_id"])
    assert info["resources"]["killed_by"] == "cancel"


def test_bad_sandbox_settings_get_422_and_change_nothing(stack: Stack) -> None:
    session = session_with(stack, memory_mb=300)
    too_big = ({"memory_mb": 10**30}, {"max_processes": 10**23}, {"cpu_seconds": 1e308})
    for bad in (
        {"memory_mb": 4},
        {"max_processes": 2},
        {"network": "some"},
        {"cpu_seconds": -1},
        *too_big,  # past what the kernel takes: every call of the session failed
    ):
        resp = stack.api("PUT", f"/api/chats/{session}/settings", json=bad)
        assert resp.status_code == 422, (bad, resp.text)
    for raw in ('{"cpu_seconds": Infinity}', '{"cpu_seconds": NaN}'):
        resp = stack.api(
            "PUT",
            f"/api/chats/{session}/settings",
            content=raw,
            headers={"Content-Type": "application/json"},
        )
        assert resp.status_code == 422, (raw, resp.text)
    listed = {s["session_id"]: s for s in stack.api("GET", "/api/chats").json()}
    assert listed[session]["sandbox"] == {"memory_mb": 300}
    # null returns a value to the server's default; other fields stay.
    settings(stack, session, network="full")
    settings(stack, session, memory_mb=None)
    listed = {s["session_id"]: s for s in stack.api("GET", "/api/chats").json()}
    assert listed[session]["sandbox"] == {"network": "full"}


def test_leaving_the_sandbox_asks_at_auto_and_runs_when_approved(stack: Stack) -> None:
    assert stack.server.proc is not None
    server = stack.server.proc.pid
    session = session_with(stack, approval_level="auto")
    command = f"test -e /proc/{server} && echo server-visible"
    session, task_id, _ = stack.start_shell(command, session, sandbox=False)
    approval = first_pending(stack, session)
    assert [f["rule_id"] for f in approval["findings"]] == ["sandbox.escape"]
    assert decide(stack, "approve", approval)[0] == 200
    task = stack.wait_task(task_id)
    told = [m for m in task["messages"] if m["role"] == "tool"][-1]["content"]
    assert "server-visible" in told
    audit = stack.api("GET", "/api/governance/audit", params={"session_id": session}).json()
    entry = audit["items"][0]
    assert entry["outcome"] == "allowed" and entry["sandbox"]["sandboxed"] is False
    assert entry["sandbox"]["memory_mb"] == 2048


def _interfaces(told: str) -> set[str]:
    """The network interfaces a call listed with ``LIST_INTERFACES``."""
    return {line.strip() for line in told.splitlines()[:-1] if line.strip()}


# /proc/net/dev shows the caller's network namespace (/sys/class/net shows the host's:
# the sandbox binds the host's /sys).
LIST_INTERFACES = "tail -n +3 /proc/net/dev | cut -d: -f1"


def test_a_call_runs_in_the_containment_that_was_judged(stack: Stack) -> None:
    """Settings changed while a person decides do not reach the call they decide on."""
    host = Path("/proc/net/dev").read_text().splitlines()[2:]
    assert len(host) > 1, "the host needs a network interface besides loopback"
    session = session_with(stack, approval_level="strict")
    session, task_id, _ = stack.start_shell(LIST_INTERFACES, session)
    approval = first_pending(stack, session)
    settings(stack, session, network="full")
    assert decide(stack, "approve", approval)[0] == 200
    task = stack.wait_task(task_id)
    told = [m for m in task["messages"] if m["role"] == "tool"][-1]["content"]
    # Judged with no network: a namespace of its own, loopback only.
    assert _interfaces(told) == {"lo"}, told
    # A call judged after the change has the host's network.
    told = run(stack, LIST_INTERFACES, session_with(stack, network="full"))["told"]
    assert "lo" in _interfaces(told) and len(_interfaces(told)) > 1, told


def test_a_sandboxed_high_finding_runs_at_auto_without_asking(stack: Stack) -> None:
    session = session_with(stack, approval_level="auto")
    result = run(stack, 'eval "$(echo echo ran-inside)"', session)
    assert "ran-inside" in result["told"]
    audit = stack.api("GET", "/api/governance/audit", params={"session_id": session}).json()
    entry = audit["items"][0]
    assert entry["verdict"] == "allow" and entry["sandbox"]["sandboxed"] is True
    assert any(f["severity"] == "HIGH" for f in entry["findings"])


def _call_processes(call_id: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TETHER_TOOL_CALL", "").endswith(f":{call_id}"):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _all_gone(procs: list[psutil.Process]) -> bool:
    return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)


def test_a_sandboxed_tree_dies_with_the_server() -> None:
    """With calls as the server's children (TETHER_KEEPER=0): bwrap's parent-death
    signal takes the tree with a kill -9 of the server. Under the keeper it dies with
    the runner instead (below)."""
    with _a_sandboxed_tree("sandbox-crash", TETHER_KEEPER="0") as (server, procs):
        server.kill()
        wait_for(lambda: _all_gone(procs), 10, "the tree to die with the server")


@contextmanager
def _a_sandboxed_tree(prefix: str, **env: str) -> Iterator[tuple[Any, list[psutil.Process]]]:
    """A server running one sandboxed call of two sleepers: (the server, the call's
    processes: bwrap, its pid 1, the shell and both sleepers)."""
    model = FakeModel()
    try:
        with temporary_server(prefix, **env, **QUIET) as server:
            register_mock_provider(server, model.url)
            _session, _task, call = Stack(server, model).start_shell("sleep 300 & sleep 301 & wait")
            procs = wait_for(
                lambda: (
                    (found := _call_processes(call["tool_call_id"])) and len(found) >= 5 and found
                ),
                what="the sandboxed tree",
            )
            yield server, procs
    finally:
        model.close()


def test_required_sandbox_without_bwrap_refuses_to_start(tmp_path: Path) -> None:
    said = refused_start(tmp_path, TETHER_SANDBOX="bwrap", PATH=str(tmp_path / "no-bin"))
    assert "refusing to start: TETHER_SANDBOX=bwrap but 'bwrap' was not found on PATH" in said


def test_a_sandboxed_call_survives_a_kill_9_and_reports_what_it_used(keeper: Stack) -> None:
    stack = keeper
    session = session_with(stack, memory_mb=512)
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    # Holds 64 MiB until the gate opens, so the figures are the runner's, not a guess.
    hold = (
        "python3 -c \"import os, time; b = b'x' * (64 << 20); print('holding', flush=True)\n"
        f"while not os.path.exists('{gate}'): time.sleep(0.02)\nprint(len(b))\""
    )
    session, task, call = stack.start_shell(hold, session, timeout=120)
    call_id = call["tool_call_id"]
    output = f"/api/tool-calls/{session}/{call_id}/output"
    wait_for(lambda: "holding" in stack.api("GET", output).text, what="the call to run")
    stack.server.kill()
    stack.server.start()
    assert stack.call(session, call_id)["status"] == "running"
    open_gate(stack, gate)
    info = stack.wait_completed(session, call_id, timeout=60)
    assert info["end_state"] == "success", info
    resources = info["resources"]
    assert resources["killed_by"] is None
    assert resources["peak_memory_bytes"] >= 64 << 20
    assert resources["processes_peak"] >= 1 and resources["cpu_seconds"] is not None
    task_result = stack.wait_task(task, timeout=30)["result"]
    assert task_result["status"] == "completed", task_result
    end = layout.call_dir(stack.server.home, call_id) / layout.STATUS_NAME
    assert '"limits": {"memory_mb": 512' in end.read_text()


def test_a_call_that_hit_its_limit_with_no_server_up_says_so(keeper: Stack) -> None:
    stack = keeper
    session = session_with(stack, max_processes=64)
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    session, task, call = stack.start_shell(
        gated(gate, "echo waiting", "perl -e 'fork while 1'"), session, timeout=120
    )
    call_id = call["tool_call_id"]
    output = f"/api/tool-calls/{session}/{call_id}/output"
    wait_for(lambda: "waiting" in stack.api("GET", output).text, what="the call to run")
    stack.server.kill()
    open_gate(stack, gate)
    status = layout.call_dir(stack.server.home, call_id) / layout.STATUS_NAME
    wait_for(status.exists, 60, "the runner to end the call on its limit")
    stack.server.start()
    info = stack.wait_completed(session, call_id, timeout=60)
    assert info["resources"]["killed_by"] == "processes"
    told = [m for m in stack.wait_task(task, timeout=30)["messages"] if m["role"] == "tool"]
    assert "stopped: process limit 64 reached" in told[-1]["content"]


def test_a_sandboxed_tree_dies_with_its_keeper() -> None:
    with _a_sandboxed_tree("sandbox-keeper-crash", TETHER_KEEPER="1") as (server, procs):
        runner = client.recorded_runner(server.home)
        assert runner is not None
        os.kill(runner.pid, signal.SIGKILL)
        wait_for(lambda: _all_gone(procs), 10, "the tree to die with its runner")
