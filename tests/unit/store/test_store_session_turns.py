"""The claim on a session's turn across nodes (store/session_turns.py): free only once the
process that made it is gone, never because its lease merely ran out."""

from __future__ import annotations

from collections.abc import Callable

from node_stores import owner_of

from tether.store.store import Store

LEASE = 10.0


async def test_a_claim_whose_lease_ran_out_is_free_only_once_its_node_is_declared_dead(
    servers: Callable[[], Store],
) -> None:
    """A node frozen past its lease, whose turn held the session: another node took the
    turn as soon as the lease had run out. If the frozen node renewed before any survivor
    declared it dead, nothing stopped its turn, and the two ran side by side."""
    a, b = servers(), servers()
    await a.nodes.join("node-a", owner_of(a), "1", 100.0)
    await b.nodes.join("node-b", owner_of(b), "1", 100.0)
    assert await a.session_turns.try_claim("s", "t-a", "node-a", owner_of(a), 100.0)

    # Node a silent for longer than its lease, not yet declared dead: still its turn.
    assert not await b.session_turns.try_claim("s", "t-b", "node-b", owner_of(b), 200.0)
    # It renews (it was only frozen): its turn goes on, and still nobody else's.
    assert await a.nodes.renew("node-a", 201.0, 0, 1)
    assert not await b.session_turns.try_claim("s", "t-b", "node-b", owner_of(b), 202.0)

    # Silent again, and declared dead this time (its turn is failed, and stopped if it
    # comes back): the turn is free.
    assert await b.nodes.renew("node-b", 300.0, 0, 1)
    (expired,) = await b.nodes.expired(300.0 - LEASE)
    assert expired.id == "node-a" and await b.nodes.claim_dead(expired)
    assert await b.session_turns.try_claim("s", "t-b", "node-b", owner_of(b), 300.0)
    assert not await a.session_turns.try_claim("s", "t-a2", "node-a", owner_of(a), 301.0)


async def test_a_claim_of_a_node_started_again_is_free(servers: Callable[[], Store]) -> None:
    """Node a's process is gone and another run of node a holds its lease: the claim the
    gone process made is free for any node (it waited for ever while node a was up)."""
    a, again, b = servers(), servers(), servers()
    await a.nodes.join("node-a", owner_of(a), "1", 100.0)
    assert await a.session_turns.try_claim("s", "t-a", "node-a", owner_of(a), 100.0)
    await again.nodes.join("node-a", owner_of(again), "1", 150.0)
    assert await b.session_turns.try_claim("s", "t-b", "node-b", owner_of(b), 151.0)
