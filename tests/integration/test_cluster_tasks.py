"""Chat tasks and approvals on three nodes: the routes answer on every node, a session's
turns never overlap across nodes, and sessions spread over the nodes stay apart.

Three real nodes on one PostgreSQL database and one Redis (cluster_support.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cluster_support import Cluster, three_nodes
from core_support import SHELL, chat_body, gated, new_session, process_gone, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from three_nodes(tmp_path)


def _submit(cluster: Cluster, node: int, session: str, text: str, **extra: Any) -> str:
    resp = cluster.api(
        node, "POST", "/api/console/chat/task", json=chat_body(text, session, **extra)
    )
    assert resp.status_code == 200, resp.text
    return str(resp.json()["task_id"])


def _task(cluster: Cluster, node: int, task_id: str) -> dict[str, Any]:
    resp = cluster.api(node, "GET", f"/api/console/chat/task/{task_id}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def _finished(cluster: Cluster, node: int, task_id: str, timeout: float = 30) -> dict[str, Any]:
    return wait_for(
        lambda: (t := _task(cluster, node, task_id))["status"] == "finished" and t,
        timeout,
        f"task {task_id} to finish",
    )


def _shell_pid(
    cluster: Cluster, node: int, session: str, command: str, **extra: Any
) -> tuple[str, int]:
    """Start a turn on ``node`` whose one call runs ``command``: (task id, shell pid)."""
    pid_file = f"p-{uuid.uuid4().hex[:8]}.pid"
    arguments = json.dumps({"command": f"echo $$ > {pid_file}; {command}"})
    cluster.model.script({"tool_calls": [(SHELL, arguments)]}, {"text": "done"})
    task_id = _submit(cluster, node, session, "run it", **extra)
    path = cluster.nodes[node].home / "workspace" / pid_file
    pid = int(wait_for(lambda: path.exists() and path.read_text().strip(), what="the pid"))
    return task_id, pid


def test_a_task_is_read_and_stopped_from_other_nodes(cluster: Cluster) -> None:
    session = new_session()
    task_id, pid = _shell_pid(cluster, 0, session, "sleep 300")
    assert _task(cluster, 1, task_id)["status"] == "running"
    # Every node shows the chat busy, not only the one running its turn.
    for node in (1, 2):
        assert cluster.api(node, "GET", f"/api/chats/{session}").json()["status"] == "running"
        listed = cluster.api(node, "GET", "/api/chats").json()
        assert [c["status"] for c in listed if c["id"] == session] == ["running"]
    resp = cluster.api(2, "POST", f"/api/console/chat/task/{task_id}/stop")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"task_id": task_id, "stopped": True}
    task = _finished(cluster, 1, task_id)
    assert task["result"]["status"] == "cancelled", task
    assert cluster.api(2, "GET", f"/api/chats/{session}").json()["status"] == "idle"
    wait_for(lambda: process_gone(pid), what="the call's shell to die")
    # Stopping again, anywhere, says it had already finished.
    again = cluster.api(1, "POST", f"/api/console/chat/task/{task_id}/stop").json()
    assert again == {"task_id": task_id, "stopped": False}
    missing = cluster.api(1, "POST", "/api/console/chat/task/task-000000000000/stop")
    assert missing.status_code == 404


def test_a_chat_is_stopped_from_another_node(cluster: Cluster) -> None:
    session = new_session()
    task_id, pid = _shell_pid(cluster, 2, session, "sleep 300")
    resp = cluster.api(0, "POST", "/api/console/chat/stop", params={"chat_id": session})
    assert resp.status_code == 200, resp.text
    assert resp.json()["stopped"] is True
    assert _finished(cluster, 0, task_id)["result"]["status"] == "cancelled"
    wait_for(lambda: process_gone(pid), what="the call's shell to die")
    idle = cluster.api(1, "POST", "/api/console/chat/stop", params={"chat_id": session})
    assert idle.json()["stopped"] is False


def _pending(cluster: Cluster, node: int, session: str) -> list[dict[str, Any]]:
    resp = cluster.api(node, "GET", "/api/approval/list", params={"session_id": session})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["pending_approvals"])


def _decide(cluster: Cluster, node: int, verb: str, approval: dict[str, Any], **extra: Any) -> Any:
    body = {"request_id": approval["request_id"], "session_id": approval["session_id"], **extra}
    return cluster.api(node, "POST", f"/api/approval/{verb}", json=body)


def test_an_approval_is_answered_on_another_node(cluster: Cluster) -> None:
    session = new_session()
    mark = f"approved-{uuid.uuid4().hex[:6]}"
    strict = {"request_context": {"approval_level": "strict"}}
    cluster.model.script(
        {"tool_calls": [(SHELL, json.dumps({"command": f"touch {mark}"}))]}, {"text": "done"}
    )
    task_id = _submit(cluster, 0, session, "go", **strict)
    # Node b lists the request node a's call waits on.
    (approval,) = wait_for(lambda: _pending(cluster, 1, session), what="the approval on b")
    assert approval["tool_name"] == SHELL
    wrong = _decide(cluster, 2, "approve", {**approval, "session_id": new_session()})
    assert wrong.status_code == 403, wrong.text
    assert not (cluster.nodes[0].home / "workspace" / mark).exists()
    # Approved on node c: the call runs on node a, the turn completes.
    resp = _decide(cluster, 2, "approve", approval)
    assert resp.status_code == 200, resp.text
    assert resp.json()["success"] is True
    assert _finished(cluster, 1, task_id)["result"]["status"] == "completed"
    assert (cluster.nodes[0].home / "workspace" / mark).exists()
    twice = _decide(cluster, 1, "deny", approval)
    assert twice.status_code == 409, twice.text
    assert _pending(cluster, 0, session) == []


def test_a_sessions_turns_never_overlap_across_nodes(cluster: Cluster) -> None:
    session = new_session()
    gate = f"g-{uuid.uuid4().hex[:6]}"
    arguments = json.dumps({"command": gated(gate, "echo first", "echo first-done")})
    cluster.model.script(
        {"tool_calls": [(SHELL, arguments)]}, {"text": "first answer"}, {"text": "second answer"}
    )
    first = _submit(cluster, 0, session, "first")
    wait_for(
        lambda: cluster.api(1, "GET", f"/api/tool-calls/{session}").json()["items"], what="call"
    )
    # The second message arrives on another node while the first turn runs: it waits.
    second = _submit(cluster, 1, session, "second")
    asked = len(cluster.model.requests)
    assert _task(cluster, 2, second)["status"] != "finished"
    (cluster.nodes[0].home / "workspace" / gate).touch()
    assert _finished(cluster, 2, first)["result"]["status"] == "completed"
    assert _finished(cluster, 2, second)["result"]["status"] == "completed"
    requests = cluster.model.requests[asked:]
    # The second turn's one model request came after the first turn had ended, and
    # carries all of it, in strict order.
    last = requests[-1]["messages"]
    users = [m["content"] for m in last if m["role"] == "user"]
    assert users == ["first", "second"]
    assert any(m["role"] == "assistant" and m.get("content") == "first answer" for m in last)
    assert _task(cluster, 0, second)["result"]["text"] == "second answer"
    cluster.model.assert_valid()


def test_twenty_sessions_over_three_nodes_stay_apart_and_in_order(cluster: Cluster) -> None:
    sessions = [new_session() for _ in range(20)]

    def converse(index: int) -> list[str]:
        session = sessions[index]
        statuses = []
        for turn in range(2):
            # Each turn through the next node, read back through the one after.
            task_id = _submit(cluster, (index + turn) % 3, session, f"{session} says {turn}")
            task = _finished(cluster, (index + turn + 1) % 3, task_id, timeout=60)
            statuses.append(task["result"]["status"])
        return statuses

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(converse, range(20)))
    assert all(r == ["completed", "completed"] for r in results), results
    for body in cluster.model.requests:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        owners = {u.split(" says ")[0] for u in users}
        assert len(owners) == 1, users  # no other session's words
        turns = [int(u.split(" says ")[1]) for u in users]
        assert turns == list(range(len(turns))), users
    for session in sessions:
        resp = cluster.api(0, "GET", f"/api/chats/{session}/messages")
        stored = [m["message"] for m in resp.json()]
        said = [(m["role"], m.get("content")) for m in stored]
        assert said[0::2] == [("user", f"{session} says 0"), ("user", f"{session} says 1")]
        assert [role for role, _ in said[1::2]] == ["assistant", "assistant"], said
    cluster.model.assert_valid()


def test_a_background_result_reaches_the_sessions_next_turn_on_another_node(
    cluster: Cluster,
) -> None:
    session = new_session()
    g1, g2 = (f"g-{uuid.uuid4().hex[:6]}" for _ in range(2))
    first_call = json.dumps({"command": gated(g1, "echo one", "echo background-finished")})
    second_call = json.dumps({"command": gated(g2, "echo two", "echo two-done")})
    cluster.model.script(
        {"tool_calls": [(SHELL, first_call)]},
        {"text": "first done"},
        {"tool_calls": [(SHELL, second_call)]},
        {"text": "second done"},
    )
    first = _submit(cluster, 0, session, "first")
    call = wait_for(lambda: cluster.api(1, "GET", f"/api/tool-calls/{session}").json()["items"])
    call_id = call[0]["tool_call_id"]
    # Sent to the background from node b; turn one ends, the call runs on on node a.
    assert cluster.api(1, "POST", f"/api/tool-calls/{session}/{call_id}/offload").status_code == 202
    assert _finished(cluster, 2, first)["result"]["status"] == "completed"
    # Turn two runs on node c and holds the session while its own call waits.
    second = _submit(cluster, 2, session, "second")
    wait_for(lambda: len(cluster.api(0, "GET", f"/api/tool-calls/{session}").json()["items"]) == 2)
    # The background call ends on node a, which queues its result and wakes the session:
    # that turn waits, since node c holds the session.
    (cluster.nodes[0].home / "workspace" / g1).touch()
    woken = wait_for(
        lambda: cluster.rows(
            f"SELECT id FROM tasks WHERE trigger = 'background_result' AND session_id = '{session}'"
        ),
        what="the wake-up task",
    )
    (cluster.nodes[2].home / "workspace" / g2).touch()
    assert _finished(cluster, 1, second)["result"]["text"] == "second done"
    # Turn two took the result at its next step; the woken turn found nothing left.
    woke = _finished(cluster, 1, woken[0]["id"])
    assert woke["result"]["status"] == "completed" and not woke["result"].get("text"), woke
    requests = cluster.model.requests
    assert len(requests) == 4, [r["messages"][-1] for r in requests]
    last = requests[-1]["messages"]
    assert any("background-finished" in str(m.get("content")) for m in last)
    cluster.model.assert_valid()
