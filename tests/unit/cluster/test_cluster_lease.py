"""Leases over a real store with a clock the test moves: renewal, expiry, one survivor
declaring a dead node, a node declared dead taking its lease back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tether.cluster.lease import Load, NodeLease
from tether.store.database import Database
from tether.store.nodes import NodeRepository
from tether.store.records import NodeRecord


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def repo(database_url: str) -> AsyncIterator[NodeRepository]:
    db = Database(database_url)
    await db.migrate()
    yield NodeRepository(db)
    await db.close()


def lease(repo: NodeRepository, clock: Clock, name: str, lost: list[str]) -> NodeLease:
    async def on_lost(node: NodeRecord) -> None:
        lost.append(f"{name} saw {node.id} (owner {node.owner}) lost")

    async def on_return() -> None:
        lost.append(f"{name} came back")

    return NodeLease(
        repo,
        name,
        "1.0",
        15.0,
        lambda: Load(2, 1),
        on_lost,
        clock,
        owner=f"owner-{name}",
        on_return=on_return,
    )


async def test_a_silent_node_is_declared_dead_by_one_survivor(repo: NodeRepository) -> None:
    clock, lost = Clock(), []
    a, b, c = (lease(repo, clock, name, lost) for name in ("a", "b", "c"))
    for each in (a, b, c):
        await each.join()
    clock.now += 10
    await a.renew()
    await b.renew()
    assert await a.sweep() == [] and lost == []
    nodes = {n.id: n for n in await repo.all()}
    assert (nodes["a"].live_calls, nodes["a"].running_tasks) == (2, 1)
    assert all(a.is_alive(n) for n in nodes.values())

    clock.now += 6  # c's last renewal is 16 s old, a's and b's 6 s
    assert not a.is_alive(nodes["c"])
    assert await b.sweep() == ["c"]
    assert await a.sweep() == []
    assert lost == ["b saw c (owner owner-c) lost"]
    assert sorted(n.id for n in await repo.all()) == ["a", "b"]

    # c comes back: its renewal finds no lease, drops what was ended for it, and takes
    # the lease again; it drops once more at its next renewal (the survivor may still
    # have been ending its rows), then no more.
    await c.renew()
    assert sorted(n.id for n in await repo.all()) == ["a", "b", "c"]
    await c.renew()
    await c.renew()
    assert lost[1:] == ["c came back", "c came back"]


async def test_live_owners_are_those_of_the_other_unexpired_leases(repo: NodeRepository) -> None:
    clock, lost = Clock(), []
    a, b, c = (lease(repo, clock, name, lost) for name in ("a", "b", "c"))
    for each in (a, b, c):
        await each.join()
    clock.now += 10
    await b.renew()
    clock.now += 6  # c's lease ran out (not yet declared dead), b's did not
    assert await a.live_owners() == {"owner-b"}
    # The asking node's own row names its last run's owner: never counted alive.
    assert await b.live_owners() == set()
    await b.stop()
    assert await a.live_owners() == set()


async def test_a_clean_stop_gives_the_lease_up(repo: NodeRepository) -> None:
    clock, lost = Clock(), []
    a = lease(repo, clock, "a", lost)
    await a.join()
    await a.stop()
    assert await repo.all() == []
