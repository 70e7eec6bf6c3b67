"""This node's lease: a row in `nodes` it renews every few seconds.

A node whose renewal is older than the lease time is dead to the others. The lease is
renewed on a timer of its own, so a node busy with turns still renews; a node that is
stopped, killed or cut off from the database stops renewing. After each renewal a node
looks for leases that ran out; the one survivor whose conditional delete removes such a
lease declares that node dead and runs ``on_node_lost`` for it (tether/node_loss.py ends
that node's calls, tasks, cron runs and approvals). A node that comes back and finds its
lease gone runs ``on_return`` before it joins again, and once more at its next renewal:
the survivor may still have been ending its rows when the lease was found gone. A
declaration and the node's own join never overlap (``NodeRepository.settling``): a
restart that lands as the lease runs out waits for the survivor to end its rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tether.errors import OutOfStorage
from tether.store.nodes import NodeRepository
from tether.store.records import NodeRecord

log = logging.getLogger(__name__)

# Renewals per lease period: a node misses four in a row before it is declared dead.
RENEWALS_PER_LEASE = 5


@dataclass(frozen=True)
class Load:
    """What a node is running, reported with each renewal."""

    live_calls: int
    running_tasks: int


class NodeLease:
    """Joins the cluster, renews the lease until stopped, and leaves at a clean stop."""

    def __init__(
        self,
        repo: NodeRepository,
        node_id: str,
        version: str,
        lease_seconds: float,
        load: Callable[[], Load],
        # What a survivor does with a dead node's lease row (its ``owner`` names the rows).
        on_node_lost: Callable[[NodeRecord], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.time,
        *,
        owner: str | None = None,
        # What this node does when it finds it was declared dead: drop what was ended.
        on_return: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._repo = repo
        self.node_id = node_id
        #: The owner id of this process, recorded on the lease (store/owners.py).
        self.owner = owner
        self._version = version
        self.lease_seconds = lease_seconds
        self._load = load
        self._on_node_lost = on_node_lost
        self._on_return = on_return
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        # Set when this node came back after being declared dead: on_return runs again.
        self._settling = False

    @property
    def renew_every(self) -> float:
        return self.lease_seconds / RENEWALS_PER_LEASE

    def is_alive(self, node: NodeRecord) -> bool:
        """Whether ``node`` renewed its lease within the lease time."""
        return node.id == self.node_id or self._clock() - node.renewed_at <= self.lease_seconds

    async def join(self) -> None:
        """Take this node's lease (a restarted node takes its own back); if a survivor is
        declaring this node dead meanwhile, once it has ended this node's rows."""
        async with self._repo.settling(self.node_id):
            await self._repo.join(self.node_id, self.owner, self._version, self._clock())

    def start(self) -> None:
        """Renew on a timer until `stop`."""
        self._task = asyncio.create_task(self._renew_forever(), name="node-lease")

    async def renew(self) -> None:
        """One renewal; a lease another node removed is taken again, once what was ended
        for this node in the meantime is dropped (``on_return``)."""
        load = self._load()
        now = self._clock()
        if await self._repo.renew(self.node_id, now, load.live_calls, load.running_tasks):
            if self._settling:
                self._settling = False
                await self._returned()
            return
        log.warning(
            "node %s: lease was gone (declared dead by another node?); dropping what was "
            "ended for it, then joining again",
            self.node_id,
        )
        self._settling = True
        await self._returned()
        await self.join()

    async def live_owners(self) -> set[str]:
        """The owner ids on the other nodes' leases that have not run out."""
        return await self._repo.live_owners(self._clock() - self.lease_seconds, self.node_id)

    async def _returned(self) -> None:
        if self._on_return is not None:
            await self._on_return()

    async def sweep(self) -> list[str]:
        """Declare dead the nodes whose lease ran out (the ones this node won)."""
        lost = []
        for node in await self._repo.expired(self._clock() - self.lease_seconds):
            if node.id == self.node_id:
                continue
            # The node may be taking its lease back at this moment (a restart): one of
            # the two goes first, and the claim fails if the node renewed.
            async with self._repo.settling(node.id):
                if await self._repo.claim_dead(node):
                    await self._declare_dead(node)
                    lost.append(node.id)
        return lost

    async def _declare_dead(self, node: NodeRecord) -> None:
        silent = self._clock() - node.renewed_at
        log.warning("node %s declared dead (no renewal for %.0f s)", node.id, silent)
        if self._on_node_lost is not None:
            try:
                await self._on_node_lost(node)
            except Exception:
                # Its rows stay unfinished; the next start of any node recovers them
                # (no live lease carries their owner).
                log.exception("ending the rows of lost node %s failed", node.id)

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.renew_every)
            try:
                await self.renew()
                await self.sweep()
            except Exception as exc:
                # A database hiccup must not end the renewals; the next one may pass. A
                # full disk is said in a line: a traceback every few seconds would only
                # add to the log on it.
                log.warning(
                    "node %s: lease renewal or sweep failed: %s",
                    self.node_id,
                    exc,
                    exc_info=not isinstance(exc, OutOfStorage),
                )

    async def stop(self) -> None:
        """Stop renewing and give the lease up (if the database takes it: else it runs
        out, or this node's next start takes it back)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        try:
            await self._repo.leave(self.node_id)
        except OutOfStorage as exc:
            # The rest of the shutdown (the database closed, the owner's lock let go)
            # must still happen.
            log.warning("node %s: the lease could not be given up: %s", self.node_id, exc)
