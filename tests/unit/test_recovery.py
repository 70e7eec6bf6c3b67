"""Which owners start-up recovery takes for dead, and what it reaps of theirs.

Where the lock directory is complete (SQLite) a free lock file is the only proof; where
it is not (PostgreSQL) an owner no live lease carries is dead too. Process groups are
reaped only for owners proven dead here: another machine's group numbers mean nothing
on this one.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import recovery
from tether.cluster.lease import Load, NodeLease
from tether.store.database import Database
from tether.store.owners import OwnerLock
from tether.store.records import ToolCallRecord
from tether.store.store import Store
from tether.store.toolcalls import ToolCallRepository
from tether.toolcalls.launcher import MARKER_VAR

LEASE = 15.0
LIVE, UNLEASED, EXPIRED, LAST_RUN = "aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004"
# Crashed on this home (its lock file is free) a moment ago: its lease has not run out.
CRASHED = "aaaa0005"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process in a group of its own, as a call's tree is: the call ``call-local`` of
    the owner ``local``, marked as Tether marks it."""
    env = {**os.environ, MARKER_VAR: "tether-local:call-local"}
    with subprocess.Popen(["sleep", "300"], start_new_session=True, env=env) as proc:
        try:
            yield proc
        finally:
            proc.kill()


def running(call_id: str) -> ToolCallRecord:
    return ToolCallRecord(
        call_id, "s", None, "default", "shell", {}, "running", None, None, False, None,
        None, None, time.time(), None,
    )  # fmt: skip


async def rows_of(db: Database, *owners: str | None) -> None:
    for owner in owners:
        await ToolCallRepository(db, owner).insert(running(f"call-{owner}"))


async def test_without_a_complete_directory_an_owner_without_a_live_lease_is_dead(
    db: Database, tmp_path: Path
) -> None:
    clock = Clock()
    directory = tmp_path / "owners"
    me = OwnerLock.claim(directory, complete=False)
    try:
        (directory / f"{CRASHED}.lock").touch()
        store = Store(db, me)
        await rows_of(db, LIVE, UNLEASED, EXPIRED, LAST_RUN, CRASHED, None, me.id)
        nodes = store.nodes
        await nodes.join("node-expired", EXPIRED, "1", clock.now - LEASE - 1)
        await nodes.join("node-live", LIVE, "1", clock.now - 1)
        await nodes.join("node-crashed", CRASHED, "1", clock.now - 1)
        # This node's own row still names its last run's owner, renewed a moment ago.
        await nodes.join("node-me", LAST_RUN, "1", clock.now - 1)
        lease = NodeLease(nodes, "node-me", "1", LEASE, lambda: Load(0, 0), clock=clock)

        dead = await recovery.dead_owners(store, me, lease)
        assert dead.here == {CRASHED}
        assert dead.elsewhere == {UNLEASED, EXPIRED, LAST_RUN, None}
    finally:
        me.release()


async def test_with_a_complete_directory_only_the_lock_files_tell(
    db: Database, tmp_path: Path
) -> None:
    clock = Clock()
    directory = tmp_path / "owners"
    me = OwnerLock.claim(directory, complete=True)
    other = OwnerLock.claim(directory, complete=True)
    try:
        store = Store(db, me)
        await rows_of(db, other.id, UNLEASED)
        lease = NodeLease(store.nodes, "node-me", "1", LEASE, lambda: Load(0, 0), clock=clock)
        dead = await recovery.dead_owners(store, me, lease)
        # No lease at all, but the other's lock is held: alive. No file: gone.
        assert (dead.here, dead.elsewhere) == ({UNLEASED}, set())
    finally:
        me.release()
        other.release()


async def test_process_groups_are_reaped_only_for_owners_dead_here(
    db: Database, sleeper: subprocess.Popen[bytes]
) -> None:
    store = Store(db)
    for owner in ("remote", "local"):
        await ToolCallRepository(db, owner).insert(running(f"call-{owner}"))
        await store.tool_calls.update(f"call-{owner}", pgid=sleeper.pid)

    remote = recovery.DeadOwners(elsewhere=frozenset({"remote"}))
    await recovery.interrupt_calls(store, remote, "node lost", "lost", end_state="error")
    ended = await store.tool_calls.get("s", "call-remote")
    assert ended is not None and (ended.end_state, ended.end_reason) == ("error", "node lost")
    assert sleeper.poll() is None, "a group number recorded elsewhere was signalled"

    local = recovery.DeadOwners(here=frozenset({"local"}))
    await recovery.interrupt_calls(store, local, "server restarted", "restarted")
    assert sleeper.wait(timeout=5) == -9
