"""Three real nodes on one PostgreSQL database and one Redis: issue 16's figures.

Three `tether serve` processes (nodes a, b and c) share a PostgreSQL database and a
Redis key prefix that this script creates and removes afterwards. Measured, in order:

- `GET /api/tool-calls/{sid}` on each node in turn (five calls live on node b): throughput
  and p99 with 8 connections;
- a call on node b cancelled through node a: the request to the whole tree gone;
- a call on node b prints its wall-clock time every 10 ms, read on node a's `/stream`;
- 1,000 calls live, 100 sessions submitted round-robin to the three nodes: list p99 on
  every node (the session listed runs on node c, so a and b answer across nodes).

Every figure carries the machine's load average at the time, as the machine is shared.
Run: PYTHONPATH=src python bench/bench_cluster.py [rounds]   (targets: >= 2,000 req/s and
p99 < 10 ms per node; cancel < 50 ms; line p99 < 50 ms; list p99 < 20 ms with 1,000 live)
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import loadgen
from _support import (
    FakeModel,
    Server,
    chat_body,
    load_note,
    median,
    pct,
    report,
    shell_reply,
    wait_until,
)
from bench_cancel import one_cancel
from bench_many_calls import PER_SESSION, SESSIONS, start_many
from bench_stream import line_lags
from cryptography.fernet import Fernet

from tether.store.owners import OwnerLock
from tether.toolcalls import process_tree

POSTGRES = os.environ.get("TETHER_BENCH_POSTGRES", "postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("TETHER_BENCH_REDIS", "redis://127.0.0.1:6379/0")
NAMES = ("a", "b", "c")


async def _postgres(statement: str, database: str = "postgres") -> list[Any]:
    import asyncpg

    user, address = POSTGRES.split("@", 1)
    host, port = address.rsplit(":", 1)
    conn = await asyncpg.connect(host=host, port=int(port), user=user, database=database)
    try:
        return list(await conn.fetch(statement))
    finally:
        await conn.close()


class Cluster:
    """Three nodes, their database and their Redis keys; `close` removes all of it."""

    def __init__(self, **env: str) -> None:
        tag = uuid.uuid4().hex[:12]
        self.database = f"tether_bench_{tag}"
        self.prefix = f"tether-bench-{tag}"
        self.env = {
            "TETHER_DATABASE_URL": f"postgresql+asyncpg://{POSTGRES}/{self.database}",
            "TETHER_REDIS_URL": REDIS_URL,
            "TETHER_REDIS_PREFIX": self.prefix,
            "TETHER_SECRET_KEY": Fernet.generate_key().decode(),
            **env,
        }
        self.nodes: list[Server] = []
        self._created = False

    def start(self, model: FakeModel) -> None:
        asyncio.run(_postgres(f'CREATE DATABASE "{self.database}"'))
        self._created = True
        # One at a time: the first creates the schema the others find.
        for name in NAMES:
            node = Server(TETHER_NODE_ID=f"node-{name}", **self.env)
            self.nodes.append(node)
            node.start()
        self.nodes[0].register(model)

    def close(self) -> None:
        owners = self._owners()
        for node in self.nodes:
            node.close()
        # The nodes stop their calls on the way out; anything still marked as one of
        # theirs (a shutdown that timed out) is killed here.
        markers = [f"{OwnerLock.marker_prefix_of(o)}:" for o in owners]
        if markers and (left := process_tree.reap_groups([], markers)):
            print(f"bench_cluster: killed {left} leftover process(es)", file=sys.stderr)
        if self._created:
            drop = f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)'
            asyncio.run(_postgres(drop))
        self._drop_keys()

    def _owners(self) -> list[str]:
        if not self._created:
            return []
        rows = asyncio.run(
            _postgres(
                "SELECT DISTINCT owner FROM tool_calls WHERE owner IS NOT NULL", self.database
            )
        )
        return [r["owner"] for r in rows]

    def _drop_keys(self) -> None:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        try:
            keys = list(client.scan_iter(match=f"{self.prefix}:*", count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


def _per_node(loads: Sequence[loadgen.Load], value: Callable[[loadgen.Load], float]) -> str:
    return " / ".join(f"{name} {value(load):.1f}" for name, load in zip(NAMES, loads, strict=True))


def list_per_node(cluster: Cluster, model: FakeModel) -> None:
    """Five calls live on node b; each node's list of them loaded in turn."""
    session = "console:cluster-list"
    runner = cluster.nodes[1]
    model.script(shell_reply(*["sleep 300"] * 5), {"text": "done"})
    task = runner.client.post("/api/console/chat/task", json=chat_body("go", session)).json()
    path = f"/api/tool-calls/{session}"
    for node in cluster.nodes:
        wait_until(lambda node=node: node.client.get(path).json()["total"] == 5)
    loads = []
    for node in cluster.nodes:
        loadgen.run(node.port, path, seconds=1)  # warm-up
        loads.append(loadgen.run(node.port, path, seconds=5))
    note = f"{loads[0].tool}, 8 connections, 5 calls live on b; {load_note()}"
    rps = min(load.rps for load in loads)
    report(
        "cluster: list throughput, worst node",
        rps,
        "req/s",
        ">= 2000",
        rps >= 2000,
        f"per node {_per_node(loads, lambda x: x.rps)}; {note}",
    )
    p99 = max(load.p99_ms for load in loads)
    report(
        "cluster: list p99, worst node",
        p99,
        "ms",
        "< 10",
        p99 < 10,
        f"per node {_per_node(loads, lambda x: x.p99_ms)} ms; {note}",
    )
    runner.client.post(f"/api/console/chat/task/{task['task_id']}/stop")
    wait_until(lambda: runner.client.get(path).json()["total"] == 0, step=0.05)


def cancel_across(cluster: Cluster, model: FakeModel, rounds: int) -> None:
    runner, asker = cluster.nodes[1], cluster.nodes[0]
    one_cancel(runner, model, force=False, via=asker)  # warm-up
    for force in (False, True):
        ms = [one_cancel(runner, model, force, via=asker) for _ in range(rounds)]
        kind = "force" if force else "graceful"
        value = median(ms)
        note = f"{rounds} rounds, p90 {pct(ms, 90):.0f} ms; {load_note()}"
        metric = f"cluster: cancel {kind} on a, call on b -> tree gone (median)"
        report(metric, value, "ms", "< 50", value < 50, note)


def stream_across(cluster: Cluster, model: FakeModel, lines: int) -> None:
    lags = line_lags(cluster.nodes[1], model, "console:cluster-stream", lines, cluster.nodes[0])
    value = pct(lags, 99)
    note = f"{lines} lines, median {median(lags):.1f} ms; {load_note()}"
    report("cluster: line on b -> a's /stream p99", value, "ms", "< 50", value < 50, note)


def many_across(cluster: Cluster, model: FakeModel) -> None:
    many, ramp = start_many(cluster.nodes, model)
    # Session 50 was submitted to node c: a and b list it across nodes.
    path = f"/api/tool-calls/{many.sessions[SESSIONS // 2]}"
    loads = []
    for node in cluster.nodes:
        loadgen.run(node.port, path, seconds=1)
        loads.append(loadgen.run(node.port, path, seconds=5))
    p99 = max(load.p99_ms for load in loads)
    note = (
        f"per node {_per_node(loads, lambda x: x.p99_ms)} ms, "
        f"{_per_node(loads, lambda x: x.rps)} req/s; {loads[0].tool}; "
        f"{SESSIONS * PER_SESSION} running after {ramp:.1f} s; {load_note()}"
    )
    report("cluster: list p99 with 1,000 calls live, worst node", p99, "ms", "< 20", p99 < 20, note)
    stopped = many.stop()
    report("cluster: stop 100 tasks / 1,000 calls", stopped, "s", "(info)", True, load_note())


def main(rounds: int) -> None:
    model = FakeModel()
    cluster = Cluster(TETHER_MAX_CALLS_TOTAL="4096", TETHER_CANCEL_GRACE_SECONDS="0.5")
    try:
        cluster.start(model)
        list_per_node(cluster, model)
        cancel_across(cluster, model, rounds)
        stream_across(cluster, model, 300)
        many_across(cluster, model)
    finally:
        cluster.close()
        model.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
