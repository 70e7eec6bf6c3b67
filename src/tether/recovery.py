"""Start-up recovery: end what servers that are gone left behind, and nothing else.

A server may share its database with others (see store/owners.py). At start it takes an
owner id of its own, finds the owners whose rows are unfinished, and recovers only those
proven dead (:func:`dead_owners`): their calls are recorded as interrupted and their
processes reaped. The calls, tasks, approvals and cron runs of a live server are never
touched, and its processes never signalled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass

from tether import model_texts
from tether.cluster.lease import NodeLease
from tether.config import Settings
from tether.store.owners import OwnerLock, owners_directory
from tether.store.store import Store
from tether.toolcalls import process_tree

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeadOwners:
    """Owners that are gone, by what proved it, which says where their processes ran.

    ``here``: their lock file is free (or, the lock directory being complete, they have
    none): they ran on this machine, so the process groups their rows record are this
    machine's to reap. ``elsewhere``: no live lease carries them (a database shared by
    several machines): their group numbers may be another machine's, so only processes
    carrying their marker, which is unique, are reaped here.
    """

    here: frozenset[str | None] = frozenset()
    elsewhere: frozenset[str | None] = frozenset()

    @property
    def all(self) -> set[str | None]:
        return set(self.here | self.elsewhere)


async def claim_owner(settings: Settings) -> OwnerLock:
    """This server's owner id, locked for as long as the process lives."""
    directory, complete = owners_directory(settings.resolved_database_url, settings.home)
    owner = await asyncio.to_thread(OwnerLock.claim, directory, complete)
    log.debug("this server is owner %s (lock file in %s)", owner.id, directory)
    return owner


async def dead_owners(store: Store, owner: OwnerLock, lease: NodeLease) -> DeadOwners:
    """Owners that left something unfinished (or a lock file) and are provably gone.

    The one notion of a dead owner: its lock file is free (store/owners.py); or, where
    the lock directory is not complete (PostgreSQL: other nodes keep their files on
    other machines), no live lease carries it. A lease that ran out, or that a survivor
    removed, proves its owner dead however the node ended; this node's own lease row,
    which this run took (join_cluster), is never counted.
    """
    candidates = (
        await store.tool_calls.unfinished_owners()
        | await store.tasks.unfinished_owners()
        | await store.cron.running_owners()
    )
    here = await asyncio.to_thread(owner.dead_among, candidates)
    here |= await asyncio.to_thread(owner.abandoned)
    if owner.complete:
        return DeadOwners(here=frozenset(here))
    alive = await lease.live_owners()
    unleased = {o for o in candidates if o != owner.id and o not in alive}
    return DeadOwners(frozenset(here), frozenset(unleased - here))


async def interrupt_calls(
    store: Store,
    dead: DeadOwners,
    reason: str,
    unanswered: str,
    keep: Collection[str] = (),
    by_marker: bool = True,
    end_state: str = "cancelled",
) -> None:
    """Record the dead owners' unfinished calls, but those in ``keep`` (adopted), as
    ended (``end_state``, ``reason``) and kill what they left on this machine;
    ``by_marker``: also what carries their marker. Those that still awaited approval
    never ran: they are recorded denied, ``unanswered`` saying why no one answered."""
    never = (unanswered, model_texts.denied(model_texts.approval_not_given(unanswered)))
    calls = store.tool_calls
    groups = await calls.interrupt_unfinished(reason, dead.here, keep, end_state, never)
    if dead.elsewhere:
        # Their group numbers mean nothing here: only their markers find what ran here.
        await calls.interrupt_unfinished(reason, dead.elsewhere, keep, end_state, never)
    # Reap even when no group was recorded: a crash can come before the pgid is saved,
    # and the marker in the environment still finds those processes.
    owners = dead.all if by_marker else set()
    markers = tuple(f"{OwnerLock.marker_prefix_of(o)}:" for o in owners if o is not None)
    leaders = tuple(f"{marker_prefix(o)}:" for o in dead.here)
    reaped = await asyncio.to_thread(process_tree.reap_groups, groups, leaders, markers)
    if groups or reaped:
        log.info(
            "recorded %d interrupted call group(s); reaped %d process(es)", len(groups), reaped
        )


def marker_prefix(owner: str | None) -> str:
    """The marker prefix of the processes a server with this owner id starts."""
    return OwnerLock.marker_prefix_of(owner or "unowned")


async def forget(owner: OwnerLock, dead: DeadOwners) -> None:
    """Drop the lock files of the dead owners whose rows are now recovered (only those
    whose file proved them gone: another's may be held by a node cut off from the
    database)."""
    await asyncio.to_thread(owner.forget, dead.here)
