"""Start-up recovery: end what servers that are gone left behind, and nothing else.

A server may share its database with others (see store/owners.py). At start it takes an
owner id of its own, finds the owners whose rows are unfinished, and recovers only those
proven dead: their calls are recorded as interrupted and their processes reaped. The
calls, tasks, approvals and cron runs of a live server are never touched, and its
processes never signalled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from tether.config import Settings
from tether.store.owners import OwnerLock, owners_directory
from tether.store.store import Store
from tether.toolcalls import process_tree

log = logging.getLogger(__name__)


async def claim_owner(settings: Settings) -> OwnerLock:
    """This server's owner id, locked for as long as the process lives."""
    directory, complete = owners_directory(settings.resolved_database_url, settings.home)
    owner = await asyncio.to_thread(OwnerLock.claim, directory, complete)
    log.debug("this server is owner %s (lock file in %s)", owner.id, directory)
    return owner


async def dead_owners(store: Store, owner: OwnerLock) -> set[str | None]:
    """Owners that left something unfinished (or a lock file) and are provably gone."""
    candidates = (
        await store.tool_calls.unfinished_owners()
        | await store.tasks.unfinished_owners()
        | await store.cron.running_owners()
    )
    found = await asyncio.to_thread(owner.dead_among, candidates)
    return found | await asyncio.to_thread(owner.abandoned)


async def interrupt_calls(
    store: Store,
    dead: set[str | None],
    reason: str,
    keep: Collection[str] = (),
    by_marker: bool = True,
) -> None:
    """Record the dead owners' unfinished calls, but those in ``keep`` (adopted), as
    interrupted and kill what they left; ``by_marker``: also what carries their marker."""
    leftovers = await store.tool_calls.interrupt_unfinished(reason, dead, keep)
    # Reap even when no group was recorded: a crash can come before the pgid is saved,
    # and the marker in the environment still finds those processes.
    owners = dead if by_marker else set()
    markers = tuple(f"{OwnerLock.marker_prefix_of(o)}:" for o in owners if o is not None)
    reaped = await asyncio.to_thread(process_tree.reap_groups, leftovers, markers)
    if leftovers or reaped:
        log.info(
            "recorded %d interrupted call group(s); reaped %d process(es)", len(leftovers), reaped
        )


def marker_prefix(owner: str | None) -> str:
    """The marker prefix of the processes a server with this owner id starts."""
    return OwnerLock.marker_prefix_of(owner or "unowned")


async def forget(owner: OwnerLock, dead: set[str | None]) -> None:
    """Drop the lock files of the dead owners whose rows are now recovered."""
    await asyncio.to_thread(owner.forget, dead)
