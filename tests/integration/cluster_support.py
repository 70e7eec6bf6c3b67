"""Three real nodes on one PostgreSQL database and one Redis, for the cluster tests.

Always on PostgreSQL (the SQLite pass too): several nodes sharing one store is what
PostgreSQL is for. Each node has a home of its own; they share the database, the Redis
key prefix and the secret key, as a deployment's nodes do.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from core_support import FakeModel, Stack, start_server
from cryptography.fernet import Fernet
from helpers import register_mock_provider

from database_support import _database_name, _run_admin, postgres_url, require_postgresql
from redis_support import drop_prefix, new_prefix, redis_url, require_redis

NAMES = ("node-a", "node-b", "node-c")


@dataclass
class Cluster:
    """The nodes, the fake model they share, and round-robin requests over the nodes."""

    nodes: list[Any]
    model: FakeModel
    prefix: str
    database_key: str
    _turn: Iterator[int] = field(init=False)

    def __post_init__(self) -> None:
        self._turn = itertools.cycle(range(len(self.nodes)))

    def stack(self, index: int) -> Stack:
        return Stack(self.nodes[index], self.model)

    def next_node(self) -> Any:
        """The next node in turn, as a load balancer would pick it."""
        return self.nodes[next(self._turn)]

    def api(self, node: int, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.nodes[node].api_request(method, path, **kwargs)

    def rows(self, query: str) -> list[Any]:
        """What the shared store holds (for what no route shows)."""
        return _run_admin(query, _database_name(self.database_key))


def database_key(tmp_path: Path) -> str:
    return f"cluster:{tmp_path}"


def cluster_env(tmp_path: Path, prefix: str, **extra: str) -> dict[str, str]:
    return {
        "TETHER_DATABASE_URL": postgres_url(database_key(tmp_path)),
        "TETHER_REDIS_URL": redis_url(),
        "TETHER_REDIS_PREFIX": prefix,
        "TETHER_SECRET_KEY": Fernet.generate_key().decode(),
        "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
        "TETHER_LLM_MAX_RETRIES": "0",
        # The tests watch pids the calls report (the host's, outside a pid namespace).
        "TETHER_SANDBOX": "off",
        **extra,
    }


def three_nodes(tmp_path: Path, names: tuple[str, ...] = NAMES, **extra: str) -> Iterator[Cluster]:
    """Body of a fixture: three nodes (or those ``names``) up, the fake model registered;
    all stopped after."""
    require_postgresql()
    require_redis()
    prefix = new_prefix()
    env = cluster_env(tmp_path, prefix, **extra)
    model = FakeModel()
    nodes: list[Any] = []
    try:
        for name in names:
            nodes.append(start_server(tmp_path / name, TETHER_NODE_ID=name, **env))
        register_mock_provider(nodes[0], model.url)
        yield Cluster(nodes, model, prefix, database_key(tmp_path))
    finally:
        for node in nodes:
            node.close()
        model.close()
        drop_prefix(prefix)
