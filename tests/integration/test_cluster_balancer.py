"""The shipped load-balancer configuration (deploy/nginx.conf) in front of three real
nodes: requests spread over the nodes, server-sent events flow through it live, and a
call started through it is watched and cancelled through it, whichever node runs it."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_support import Cluster, three_nodes
from core_support import (
    chat_body,
    free_port,
    gated,
    process_gone,
    shell_call,
    sse_events,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"


def _nginx() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        pytest.fail("nginx is needed (scripts/ensure-nginx installs it)")
    return found


def local_config(nodes: list[Any], port: int, prefix: Path) -> str:
    """deploy/nginx.conf with the compose names and port replaced by this machine's."""
    text = CONFIG.read_text()
    for index, node in enumerate(nodes, start=1):
        text = text.replace(f"server tether-{index}:8088", f"server 127.0.0.1:{node.port}")
    text = text.replace("listen 8080;", f"listen 127.0.0.1:{port};")
    assert "tether-" not in text.split("upstream tether", 1)[1].split("}", 1)[0]
    # Files of its own, as an unprivileged test process runs it.
    head = f"pid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n" if "pid " not in text else ""
    text = head + text.replace(
        "http {",
        f"http {{\n    access_log {prefix}/access.log;\n"
        f"    client_body_temp_path {prefix}/body;\n    proxy_temp_path {prefix}/proxy;\n",
        1,
    )
    return text


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from three_nodes(tmp_path)


@pytest.fixture
def balancer(cluster: Cluster, tmp_path: Path) -> Iterator[str]:
    """deploy/nginx.conf in front of the three nodes: its URL."""
    binary = _nginx()
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(local_config(cluster.nodes, port, prefix))
    with (prefix / "stderr.log").open("wb") as stderr:
        proc = subprocess.Popen(
            [binary, "-p", str(prefix), "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _up(url) or proc.poll() is not None, what="nginx")
        assert proc.poll() is None, (prefix / "stderr.log").read_text()
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/api/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_call_is_started_watched_and_cancelled_through_the_balancer(
    cluster: Cluster, balancer: str
) -> None:
    url = balancer
    client = httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {cluster.nodes[0].token}"}, timeout=20
    )
    # Round robin: consecutive requests reach every node.
    seen = {client.get("/api/cluster").json()["node_id"] for _ in range(6)}
    assert seen == {"node-a", "node-b", "node-c"}
    session = f"console:lb-{uuid.uuid4().hex[:8]}"
    pid_file = f"p-{uuid.uuid4().hex[:6]}.pid"
    gate = f"g-{uuid.uuid4().hex[:6]}"
    command = f"echo $$ > {pid_file}; " + gated(gate, "echo before", "echo after; sleep 300")
    cluster.model.script(shell_call(command), {"text": "stopped"})
    resp = client.post("/api/console/chat/task", json=chat_body("go", session))
    assert resp.status_code == 200, resp.text
    calls = wait_for(
        lambda: client.get(f"/api/tool-calls/{session}").json()["items"], what="a call"
    )
    call_id = calls[0]["tool_call_id"]
    # Whichever node took the task runs the call; its shell wrote its pid there.
    files = [n.home / "workspace" / pid_file for n in cluster.nodes]
    found = wait_for(lambda: [f for f in files if f.exists() and f.read_text().strip()])
    pid = int(found[0].read_text())
    path = f"/api/tool-calls/{session}/{call_id}/stream"
    with client.stream("GET", path) as stream:
        events = sse_events(stream.iter_lines())
        # The call waits on the gate after one short line: that line must come through
        # the balancer now, not when a buffer fills or the call ends (which would be
        # never: the read would time out).
        assert "before" in next(events).data["text"]
        (found[0].parent / gate).touch()
        assert "after" in next(events).data["text"]
        resp = client.post(f"/api/tool-calls/{session}/{call_id}/cancel", json={"force": True})
        assert resp.status_code == 202, resp.text
        done = [e for e in events if e.data["type"] == "done"]
    assert done and done[0].data["end_state"] == "cancelled"
    wait_for(lambda: process_gone(pid), what="the call's tree to die")
    client.close()
