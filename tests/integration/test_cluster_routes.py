"""Every tool-call route answers on every node for a call another node runs.

Three real nodes on one PostgreSQL database and one Redis. The call runs on node a; the
test asks nodes b and c, as a load balancer would send a person's requests anywhere.
"""

from __future__ import annotations

import os
import re
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_support import Cluster, three_nodes
from core_support import gated, process_gone, sse_events, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TICKER = "i=0; while true; do i=$((i+1)); echo line-$i; sleep 0.1; done"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from three_nodes(tmp_path, TETHER_NODE_ANSWER_SECONDS="3")


def _call_on_a(cluster: Cluster, command: str) -> tuple[str, str, str, int]:
    """A shell call running on node a: (session, task, call id, its shell's pid)."""
    pid_file = f"p-{uuid.uuid4().hex[:8]}.pid"
    session, task_id, call = cluster.stack(0).start_shell(f"echo $$ > {pid_file}; {command}")
    path = cluster.nodes[0].home / "workspace" / pid_file
    pid = int(wait_for(lambda: path.exists() and path.read_text().strip(), what="the pid"))
    return session, task_id, call["tool_call_id"], pid


def _stream(node: Any, path: str, last_id: int | None, until: int) -> list[tuple[int, str]]:
    """(event id, text) of the chunk frames read from ``node`` until one holds line
    ``until`` (or the stream ends)."""
    headers = {"Authorization": f"Bearer {node.token}"}
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    got: list[tuple[int, str]] = []
    with httpx.stream("GET", node.base_url + path, headers=headers, timeout=20) as resp:
        assert resp.status_code == 200, resp.read()
        for event in sse_events(resp.iter_lines()):
            if event.data["type"] != "chunk":
                break
            assert event.id is not None
            got.append((event.id, event.data["text"]))
            if f"line-{until}\n" in event.data["text"]:
                break
    return got


def _line_numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"line-(\d+)", text)]


def test_every_route_works_from_other_nodes(cluster: Cluster) -> None:
    session, task_id, call_id, pid = _call_on_a(cluster, TICKER)
    base = f"/api/tool-calls/{session}/{call_id}"
    # List and detail, from b and c: the call is running, with its kill deadline.
    for node in (1, 2):
        listed = cluster.api(node, "GET", f"/api/tool-calls/{session}").json()["items"]
        assert [c["tool_call_id"] for c in listed] == [call_id]
        assert listed[0]["status"] == "running"
        assert listed[0]["kill_remaining"] is not None
        detail = cluster.api(node, "GET", base).json()
        assert (detail["status"], detail["tool_name"]) == ("running", "execute_shell_command")
    # Output so far, from c: the lines node a's call printed.
    wait_for(lambda: len(_line_numbers(_output(cluster, 2, base))) >= 3, what="output on node c")
    # Extend from c: node a's deadline moves, as every node shows.
    before = cluster.api(0, "GET", base).json()["kill_remaining"]
    resp = cluster.api(2, "POST", f"{base}/extend-deadline", json={"seconds": 600})
    assert resp.status_code == 202, resp.text
    assert resp.json()["kill_remaining"] > before + 500
    assert cluster.api(1, "GET", base).json()["kill_remaining"] > before + 500
    # Offload from b: the turn goes on without the call (its task completes), the call
    # goes on in the background on node a.
    resp = cluster.api(1, "POST", f"{base}/offload")
    assert resp.status_code == 202, resp.text
    task = cluster.stack(2).wait_task(task_id)
    assert task["result"]["status"] == "completed", task
    assert cluster.api(0, "GET", base).json()["status"] == "offloaded"
    assert not process_gone(pid)
    # Cancel from c: the tree on node a dies, every node sees the call cancelled.
    resp = cluster.api(2, "POST", f"{base}/cancel", json={"force": False})
    assert resp.status_code == 202, resp.text
    wait_for(lambda: process_gone(pid), what="the call's shell to die")
    for node in (0, 1, 2):
        info = cluster.stack(node).wait_completed(session, call_id)
        assert info["end_state"] == "cancelled"
    # What the owner answers is what the asker answers: the call has ended (409, from
    # the store), an unknown call is 404.
    again = cluster.api(1, "POST", f"{base}/cancel", json={})
    assert again.status_code == 409, again.text
    unknown = cluster.api(1, "POST", f"/api/tool-calls/{session}/call_{'0' * 24}/cancel")
    assert unknown.status_code == 404
    cluster.model.assert_valid()


def _output(cluster: Cluster, node: int, base: str) -> str:
    resp = cluster.api(node, "GET", f"{base}/output")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["is_closed"] is False
    return "".join(part["text"] for part in body["content"])


def test_a_stream_resumed_on_another_node_has_no_gap_and_no_duplicate(
    cluster: Cluster,
) -> None:
    session, task_id, call_id, pid = _call_on_a(cluster, TICKER)
    path = f"/api/tool-calls/{session}/{call_id}/stream"
    first = _stream(cluster.nodes[1], path, None, until=5)
    last_id = first[-1][0]
    # The connection dropped; the client reconnects through another node.
    second = _stream(cluster.nodes[2], path, last_id, until=12)
    ids = [i for i, _ in first + second]
    assert ids == sorted(set(ids)), ids
    numbers = _line_numbers("".join(text for _, text in first + second))
    assert numbers == list(range(1, numbers[-1] + 1))
    assert numbers[-1] >= 12
    cluster.api(0, "POST", f"/api/tool-calls/{session}/{call_id}/cancel", json={"force": True})
    cluster.stack(1).wait_task(task_id)
    wait_for(lambda: process_gone(pid), what="the call's shell to die")


def test_a_stream_followed_on_another_node_ends_with_the_call(cluster: Cluster) -> None:
    gate = f"g-{uuid.uuid4().hex[:6]}"
    session, task_id, call_id, _ = _call_on_a(
        cluster, gated(gate, before="echo before", after="echo after")
    )
    headers = {"Authorization": f"Bearer {cluster.nodes[1].token}"}
    url = cluster.nodes[1].base_url + f"/api/tool-calls/{session}/{call_id}/stream"
    with httpx.stream("GET", url, headers=headers, timeout=20) as resp:
        events = sse_events(resp.iter_lines())
        assert "before" in next(events).data["text"]
        (cluster.nodes[0].home / "workspace" / gate).touch()
        rest = list(events)
    texts = "".join(e.data.get("text", "") for e in rest)
    assert "after" in texts
    assert rest[-1].data == {"type": "done", "end_state": "success", "status": "completed"}
    assert cluster.stack(2).wait_task(task_id)["result"]["status"] == "completed"


def test_done_has_one_id_on_every_node_and_a_resume_after_it_is_204(cluster: Cluster) -> None:
    """A follower on another node that resumed past the end (an id it was never given)
    was sent ``done`` numbered one past its own id; resumed with that, the next node
    sent ``done`` again one higher, for ever. ``done`` is one past the last chunk now,
    and a resume after it is 204, which stops a browser's EventSource."""
    gate = f"g-{uuid.uuid4().hex[:6]}"
    session, task_id, call_id, _ = _call_on_a(cluster, gated(gate, "echo one", "echo two"))
    path = f"/api/tool-calls/{session}/{call_id}/stream"
    node_b, node_c = cluster.nodes[1], cluster.nodes[2]
    with httpx.stream(
        "GET", node_b.base_url + path, headers=_auth(node_b, 10**9), timeout=20
    ) as resp:
        (cluster.nodes[0].home / "workspace" / gate).touch()
        past_the_end = list(sse_events(resp.iter_lines()))
    whole = _events(node_c, path, None)
    done = whole[-1]
    assert done.data["type"] == "done" and done.id == whole[-2].id + 1  # type: ignore[operator]
    assert [(e.id, e.data) for e in past_the_end] == [(done.id, done.data)]
    for node in cluster.nodes:
        resp = httpx.get(node.base_url + path, headers=_auth(node, done.id), timeout=20)
        assert (resp.status_code, resp.content) == (204, b"")
    assert cluster.stack(2).wait_task(task_id)["result"]["status"] == "completed"


def _auth(node: Any, last_id: int | None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {node.token}"}
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    return headers


def _events(node: Any, path: str, last_id: int | None) -> list[Any]:
    with httpx.stream("GET", node.base_url + path, headers=_auth(node, last_id), timeout=20) as r:
        assert r.status_code == 200
        return list(sse_events(r.iter_lines()))


def test_an_owner_that_does_not_answer_gives_503_and_the_request_is_dropped(
    cluster: Cluster,
) -> None:
    session, task_id, call_id, pid = _call_on_a(cluster, TICKER)
    base = f"/api/tool-calls/{session}/{call_id}"
    owner = cluster.nodes[0].proc
    os.kill(owner.pid, signal.SIGSTOP)
    try:
        resp = cluster.api(1, "POST", f"{base}/cancel", json={"force": True})
    finally:
        os.kill(owner.pid, signal.SIGCONT)
    assert resp.status_code == 503, resp.text
    assert "did not answer within 3 s" in resp.json()["detail"]
    # The request reached node a only after its asker gave up: it is not carried out.
    wait_for(lambda: "dropped a call.cancel request" in cluster.nodes[0].logs_tail(), what="drop")
    assert cluster.api(0, "GET", base).json()["status"] == "running"
    assert not process_gone(pid)
    resp = cluster.api(2, "POST", f"{base}/cancel", json={"force": True})
    assert resp.status_code == 202, resp.text
    cluster.stack(0).wait_task(task_id)
    wait_for(lambda: process_gone(pid), what="the call's shell to die")
