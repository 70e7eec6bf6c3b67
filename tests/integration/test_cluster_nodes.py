"""Three nodes on one store: each holds a lease, every node lists all of them with their
load, a killed node is shown dead once its lease runs out, a stopped one leaves."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_support import FakeModel, Stack, gated, open_gate, start_server, wait_for
from cryptography.fernet import Fernet
from helpers import register_mock_provider

from database_support import shared_database_url

pytestmark = pytest.mark.integration

LEASE = "5"


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[tuple[list[Any], FakeModel]]:
    env = {
        "TETHER_DATABASE_URL": shared_database_url(tmp_path),
        "TETHER_NODE_LEASE_SECONDS": LEASE,
        # Every node opens the provider key node a sealed.
        "TETHER_SECRET_KEY": Fernet.generate_key().decode(),
        "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
        "TETHER_LLM_MAX_RETRIES": "0",
    }
    model = FakeModel()
    servers: list[Any] = []
    try:
        for name in ("node-a", "node-b", "node-c"):
            servers.append(start_server(tmp_path / name, TETHER_NODE_ID=name, **env))
        register_mock_provider(servers[0], model.url)
        yield servers, model
    finally:
        for server in servers:
            server.close()
        model.close()


def cluster(server: Any) -> dict[str, Any]:
    resp = server.api_request("GET", "/api/cluster")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def by_id(server: Any) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in cluster(server)["nodes"]}


def test_every_node_sees_every_lease_and_the_load(nodes: tuple[list[Any], FakeModel]) -> None:
    (a, b, c), model = nodes
    for server, name in ((a, "node-a"), (b, "node-b"), (c, "node-c")):
        seen = cluster(server)
        assert seen["node_id"] == name
        assert seen["lease_seconds"] == float(LEASE)
        assert {n["id"]: n["alive"] for n in seen["nodes"]} == {
            "node-a": True,
            "node-b": True,
            "node-c": True,
        }
        assert f"node {name} joined the cluster" in server.logs_tail(20_000)
    # A call held open on node b shows in b's load, as node a reads it.
    stack = Stack(b, model)
    _, task_id, _ = stack.start_shell(gated("lease", before="echo held"))
    wait_for(
        lambda: by_id(a)["node-b"]["live_calls"] == 1 and by_id(a)["node-b"]["running_tasks"] == 1,
        timeout=15,
        what="node b's renewal reporting its call and task",
    )
    open_gate(stack, "lease")
    stack.wait_task(task_id)
    wait_for(lambda: by_id(a)["node-b"]["live_calls"] == 0, 15, "node b's load back to 0")


def test_a_killed_node_is_declared_dead_once_and_a_stopped_one_leaves(
    nodes: tuple[list[Any], FakeModel],
) -> None:
    (a, b, c), _ = nodes
    c.kill()
    # Gone from every node's list once a survivor has declared it dead (within the lease
    # and one renewal period, with slack for a loaded machine).
    wait_for(lambda: "node-c" not in by_id(a), float(LEASE) * 3, "node c declared dead")
    assert "node-c" not in by_id(b)
    declared = [s for s in (a, b) if "node node-c declared dead" in s.logs_tail(50_000)]
    assert len(declared) == 1, "exactly one survivor claims a dead node"
    assert by_id(a)["node-b"]["alive"]
    b.stop()
    assert "node-b" not in by_id(a)


def test_the_default_node_id_is_host_and_port(tmp_path: Path) -> None:
    server = start_server(tmp_path / "home")
    try:
        assert cluster(server)["node_id"] == f"{socket.gethostname()}:{server.port}"
    finally:
        server.close()
