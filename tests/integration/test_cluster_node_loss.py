"""Node loss on a shared PostgreSQL: two real nodes, one killed (or frozen); the survivor
ends what the lost node left, and a frozen node that comes back drops what was ended.

Always on PostgreSQL, whichever database the run is on: nodes with their own homes share
a database only there (each home's lock files are its own, so only the leases tell a
dead node from a live one). Without PostgreSQL the module is skipped, and fails on CI.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from core_support import FakeModel, Stack, process_gone, start_server, wait_for
from cryptography.fernet import Fernet
from governance_support import CLOCK, audit, first_pending, pending, script, submit
from helpers import register_mock_provider

from database_support import postgres_url, require_postgresql
from tether.toolcalls.launcher import MARKER_VAR

pytestmark = pytest.mark.integration

# Small, so a loss is seen fast; not smaller, so a node starved by a busy machine for a
# moment is not declared dead under a test.
LEASE = 4.0
# The bound: a killed node's calls end on the others within 20 s.
DECLARED_WITHIN = 20.0


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[tuple[Stack, Stack]]:
    """Nodes a and b on one PostgreSQL database, each with its own home: (a, b)."""
    require_postgresql()
    env = {
        "TETHER_DATABASE_URL": postgres_url(f"node-loss:{tmp_path}"),
        "TETHER_NODE_LEASE_SECONDS": str(LEASE),
        "TETHER_SECRET_KEY": Fernet.generate_key().decode(),
        # The test finds the call's processes by their host pid and environment.
        "TETHER_SANDBOX": "off",
        "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
        "TETHER_LLM_MAX_RETRIES": "0",
    }
    model = FakeModel()
    servers: list[Any] = []
    try:
        for name in ("node-a", "node-b"):
            servers.append(start_server(tmp_path / name, TETHER_NODE_ID=name, **env))
        register_mock_provider(servers[0], model.url)
        yield Stack(servers[0], model), Stack(servers[1], model)
    finally:
        for server in servers:
            if server.proc is not None and server.proc.poll() is None:
                os.kill(server.proc.pid, signal.SIGCONT)  # a frozen node must stop too
            server.close()
        model.close()


def marked(call_id: str) -> list[int]:
    """Pids of the processes carrying the marker of ``call_id`` (any owner's)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARKER_VAR, "").endswith(f":{call_id}"):
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def seen_from(stack: Stack, path: str) -> dict[str, Any]:
    resp = stack.api("GET", path)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def ended_node_lost(stack: Stack, session: str, call_id: str) -> bool:
    info = seen_from(stack, f"/api/tool-calls/{session}/{call_id}")
    return (info["status"], info["end_state"], info["extra"].get("end_reason")) == (
        "completed",
        "error",
        "node lost",
    )


def failed_node_lost(stack: Stack, task_id: str, session: str) -> bool:
    task = seen_from(stack, f"/api/console/chat/task/{task_id}")
    lost = {"status": "failed", "error": {"message": "node lost"}, "session_id": session}
    return bool(task["result"] == lost)


def awaiting_approval(a: Stack) -> tuple[str, str, dict[str, Any]]:
    """A turn on ``a`` whose call waits for a person: (session, task id, the request)."""
    script(a, CLOCK)
    session = f"console:lost-{uuid.uuid4().hex[:8]}"
    task_id = submit(a, session, "strict")
    return session, task_id, first_pending(a, session)


def test_a_killed_nodes_call_task_tree_and_approval_are_ended_by_the_survivor(
    nodes: tuple[Stack, Stack],
) -> None:
    a, b = nodes
    asked_session, asked_task, request = awaiting_approval(a)
    pid_file = f"child-{uuid.uuid4().hex[:8]}.pid"
    # The shell dies with its server (parent-death signal); its child outlives it, as
    # real leftovers do, until something reaps it.
    command = f"echo started; sleep 300 & echo $! > {pid_file}; wait"
    session, task_id, call = a.start_shell(command)
    call_id = call["tool_call_id"]
    path = a.workspace / pid_file
    child = int(wait_for(lambda: path.exists() and path.read_text().strip(), what="the pid"))
    assert child in marked(call_id)

    a.server.kill()
    assert not process_gone(child)
    # The survivor ends the rows one kind after another: the log line comes last.
    wait_for(
        lambda: "node node-a lost" in b.server.logs_tail(50_000),
        DECLARED_WITHIN,
        "node a declared lost by b",
    )
    assert ended_node_lost(b, session, call_id)
    assert failed_node_lost(b, task_id, session)
    assert process_gone(child)
    assert marked(call_id) == []
    # The call that awaited approval ended too, and its request was denied and audited.
    assert ended_node_lost(b, asked_session, request["tool_call_id"])
    assert failed_node_lost(b, asked_task, asked_session)
    denials = [e for e in audit(b, asked_session) if e["decided_by"] == "node_lost"]
    assert [(e["outcome"], e["request_id"]) for e in denials] == [("denied", request["request_id"])]
    nodes_seen = seen_from(b, "/api/cluster")["nodes"]
    assert [n["id"] for n in nodes_seen] == ["node-b"]


def test_a_frozen_node_that_comes_back_drops_what_was_ended_for_it(
    nodes: tuple[Stack, Stack],
) -> None:
    a, b = nodes
    session, task_id, request = awaiting_approval(a)
    call_id = request["tool_call_id"]
    assert a.server.proc is not None
    os.kill(a.server.proc.pid, signal.SIGSTOP)
    try:
        wait_for(
            lambda: "node node-a lost" in b.server.logs_tail(50_000),
            DECLARED_WITHIN,
            "node a declared lost by b",
        )
        assert ended_node_lost(b, session, call_id)
    finally:
        os.kill(a.server.proc.pid, signal.SIGCONT)
    # Back, a finds its lease gone: the call still waiting there (nothing else would end
    # it before the approval's timeout, minutes away) is stopped and its task with it;
    # then a joins again.
    wait_for(lambda: not pending(a, session), 15, "a's request dropped")
    wait_for(
        lambda: (
            {n["id"]: n["running_tasks"] for n in seen_from(a, "/api/cluster")["nodes"]}
            == {"node-a": 0, "node-b": 0}
        ),
        15,
        "a back in the cluster, running nothing",
    )
    logs = a.server.logs_tail(50_000)
    assert "stopped 1 call(s) and 1 task(s) that were ended for it" in logs
    # What the survivor recorded stands: a's own stop did not overwrite it.
    assert ended_node_lost(a, session, call_id)
    assert failed_node_lost(a, task_id, session)
