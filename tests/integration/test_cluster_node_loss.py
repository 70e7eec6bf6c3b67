"""Node loss: three real nodes on one PostgreSQL database and one Redis; node a is
killed (or frozen), a survivor ends what it left, and a frozen node that comes back
drops what was ended for it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import Cluster, three_nodes
from core_support import Stack, marked, process_gone, wait_for
from governance_support import (
    CLOCK,
    audit,
    first_pending,
    marks_dir,
    pending,
    script,
    shell,
    submit,
)

from database_support import held_transaction

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

# Small, so a loss is seen fast; not smaller, so a node starved by a busy machine for a
# moment is not declared dead under a test.
LEASE = 4.0
# The bound: a killed node's calls end on the others within 20 s.
DECLARED_WITHIN = 20.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    body = three_nodes(tmp_path, TETHER_NODE_LEASE_SECONDS=str(LEASE))
    made = next(body)
    try:
        yield made
    finally:
        for node in made.nodes:
            if node.proc is not None and node.proc.poll() is None:
                os.kill(node.proc.pid, signal.SIGCONT)  # a frozen node must stop too
        body.close()


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


def denied_node_lost(stack: Stack, session: str, call_id: str) -> bool:
    """A call that awaited approval on the lost node: it never ran, and no one can answer
    for it now (the survivor records it denied, saying why)."""
    info = seen_from(stack, f"/api/tool-calls/{session}/{call_id}")
    return (info["status"], info["end_state"], info["extra"].get("end_reason")) == (
        "completed",
        "denied",
        "the node running the call was lost while it awaited approval",
    )


def failed_node_lost(stack: Stack, task_id: str, session: str) -> bool:
    task = seen_from(stack, f"/api/console/chat/task/{task_id}")
    lost = {"status": "failed", "error": {"message": "node lost"}, "session_id": session}
    return bool(task["result"] == lost)


def decisions_on(stack: Stack, session: str, request_id: str) -> list[tuple[str, str]]:
    """The audit trail's entries for one approval request: (outcome, decided_by)."""
    return [
        (e["outcome"], e["decided_by"])
        for e in audit(stack, session)
        if e["request_id"] == request_id
    ]


def awaiting_approval(a: Stack) -> tuple[str, str, dict[str, Any]]:
    """A turn on ``a`` whose call waits for a person: (session, task id, the request)."""
    script(a, CLOCK)
    session = f"console:lost-{uuid.uuid4().hex[:8]}"
    task_id = submit(a, session, "strict")
    return session, task_id, first_pending(a, session)


def declared_by(survivors: list[Stack]) -> list[Stack]:
    """The survivors that logged declaring node a lost (it logs that once it has ended
    all it ended)."""
    return [s for s in survivors if "node node-a lost" in s.server.logs_tail(100_000)]


def test_a_killed_nodes_call_task_tree_and_approval_are_ended_by_one_survivor(
    cluster: Cluster,
) -> None:
    a, b, c = (cluster.stack(i) for i in range(3))
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
    (survivor,) = wait_for(lambda: declared_by([b, c]), DECLARED_WITHIN, "node a declared lost")
    other = c if survivor is b else b
    assert declared_by([other]) == [], "exactly one survivor ends a lost node's rows"
    # Every survivor shows it: the call ended "node lost", the task failed with that
    # reason, the call's tree is gone.
    for node in (b, c):
        assert ended_node_lost(node, session, call_id)
        assert failed_node_lost(node, task_id, session)
    assert process_gone(child)
    assert marked(call_id) == []
    # The call that awaited approval ended too, and its request was denied and audited.
    assert denied_node_lost(other, asked_session, request["tool_call_id"])
    assert failed_node_lost(other, asked_task, asked_session)
    denials = [e for e in audit(other, asked_session) if e["decided_by"] == "node_lost"]
    assert [(e["outcome"], e["request_id"]) for e in denials] == [("denied", request["request_id"])]
    assert [n["id"] for n in seen_from(other, "/api/cluster")["nodes"]] == ["node-b", "node-c"]


def test_a_frozen_node_that_comes_back_drops_what_was_ended_for_it(cluster: Cluster) -> None:
    a, b, c = (cluster.stack(i) for i in range(3))
    session, task_id, request = awaiting_approval(a)
    call_id = request["tool_call_id"]
    assert a.server.proc is not None
    os.kill(a.server.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: declared_by([b, c]), DECLARED_WITHIN, "node a declared lost")
        assert denied_node_lost(b, session, call_id)
    finally:
        os.kill(a.server.proc.pid, signal.SIGCONT)
    # Back, a finds its lease gone: the call still waiting there (nothing else would end
    # it before the approval's timeout, minutes away) is stopped and its task with it;
    # then a joins again.
    wait_for(lambda: not pending(a, session), 15, "a's request dropped")
    wait_for(
        lambda: (
            {n["id"]: n["running_tasks"] for n in seen_from(a, "/api/cluster")["nodes"]}
            == {"node-a": 0, "node-b": 0, "node-c": 0}
        ),
        15,
        "a back in the cluster, running nothing",
    )
    logs = a.server.logs_tail(100_000)
    assert "stopped 1 call(s) and 1 task(s) that were ended for it" in logs
    # What the survivor recorded stands: a's own stop did not overwrite it.
    assert denied_node_lost(a, session, call_id)
    assert failed_node_lost(a, task_id, session)
    # One denial, audited once, by the survivor: a's stop of the call adds no entry.
    assert decisions_on(a, session, request["request_id"]) == [("denied", "node_lost")]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Cluster]:
    """Nodes a and b: b is the one survivor."""
    yield from three_nodes(tmp_path, ("node-a", "node-b"), TETHER_NODE_LEASE_SECONDS=str(LEASE))


def waiting_on_locks(cluster: Cluster) -> int:
    """Sessions on the shared store waiting for a lock another holds."""
    query = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return int(cluster.rows(query)[0][0])


def test_a_node_restarting_as_it_is_declared_dead_takes_up_none_of_what_was_ended(
    pair: Cluster,
) -> None:
    a, b = pair.stack(0), pair.stack(1)
    session, task_id, call = a.start_shell("echo started; sleep 300")
    call_id = call["tool_call_id"]
    asked = len(pair.model.requests)
    a.server.kill()
    # Node b declares a dead and is held in the middle of ending its rows (the test holds
    # the call's row); node a starts again meanwhile, its runner still running the call.
    lock = f"SELECT 1 FROM tool_calls WHERE id = '{call_id}' FOR UPDATE"
    with held_transaction(pair.database_key, lock):
        wait_for(lambda: waiting_on_locks(pair) == 1, DECLARED_WITHIN, "b ending a's rows")
        restart = threading.Thread(target=a.server.start)
        restart.start()
        wait_for(lambda: waiting_on_locks(pair) == 2, 30, "a's start to wait on b")
    restart.join(60)
    assert not restart.is_alive(), "node a did not start"
    assert declared_by([b]) == [b]
    # What b ended stays ended, and a took none of it up: the call's tree is gone, the
    # task stays failed, the model is not asked again, and a runs nothing.
    wait_for(lambda: marked(call_id) == [], what="the call's tree to die")
    for node in (a, b):
        assert ended_node_lost(node, session, call_id)
        assert failed_node_lost(node, task_id, session)
    wait_for(
        lambda: (
            {
                n["id"]: (n["live_calls"], n["running_tasks"])
                for n in seen_from(a, "/api/cluster")["nodes"]
            }
            == {"node-a": (0, 0), "node-b": (0, 0)}
        ),
        15,
        "a back in the cluster, running nothing",
    )
    assert len(pair.model.requests) == asked
    assert "declared dead" not in a.server.logs_tail(100_000)


def sent_unread(node: Any, path: str, body: dict[str, Any]) -> socket.socket:
    """A POST to ``node`` written into its socket, unread (the node may be frozen): the
    kernel holds it until the node reads it. Read the answer with :func:`answered`."""
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Authorization: Bearer {node.token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", node.port), timeout=30)
    sock.sendall(head.encode() + payload)
    return sock


def answered(sock: socket.socket) -> tuple[int, str]:
    """The status and body of the answer on ``sock``, once the node sent it all."""
    with sock:
        raw = b"".join(iter(lambda: sock.recv(65536), b""))
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def test_an_approval_given_on_a_frozen_node_after_a_survivor_denied_it_is_refused(
    cluster: Cluster,
) -> None:
    a, b, c = (cluster.stack(i) for i in range(3))
    marks = marks_dir(a)
    script(a, shell(f"touch {marks}/ran"))
    session = f"console:lost-{uuid.uuid4().hex[:8]}"
    task_id = submit(a, session, "strict")
    request = first_pending(a, session)
    assert a.server.proc is not None
    os.kill(a.server.proc.pid, signal.SIGSTOP)
    try:
        (survivor,) = wait_for(lambda: declared_by([b, c]), DECLARED_WITHIN, "a declared lost")
        assert denied_node_lost(survivor, session, request["tool_call_id"])
        # A person approves on node a, which reads it as it runs again: before it finds
        # its lease gone, its call still waits there on the request.
        keys = {k: request[k] for k in ("request_id", "session_id")}
        approving = sent_unread(a.server, "/api/approval/approve", keys)
    finally:
        os.kill(a.server.proc.pid, signal.SIGCONT)
    status, body = answered(approving)
    # The survivor's denial stands: the person is told the request was decided, the
    # call never runs, and nothing records it allowed.
    assert status == 409, body
    assert failed_node_lost(survivor, task_id, session)
    wait_for(lambda: not pending(a, session), 15, "a's request dropped")
    wait_for(
        lambda: (
            {n["id"]: n["running_tasks"] for n in seen_from(a, "/api/cluster")["nodes"]}.get(
                "node-a"
            )
            == 0
        ),
        15,
        "a running nothing",
    )
    assert not (marks / "ran").exists()
    assert denied_node_lost(a, session, request["tool_call_id"])
    assert [e for e in audit(a, session) if e["outcome"] == "allowed"] == []
    assert decisions_on(a, session, request["request_id"]) == [("denied", "node_lost")]
