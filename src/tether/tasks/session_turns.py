"""One turn per session at a time: on this node by a lock per session, and across nodes
(several nodes on one store) by a claim in the store as well.

A task waits for the session's turn (it does not fail): a message sent while the
session is busy runs once the turn before it ends, on whichever node.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from tether.store.session_turns import SessionTurnRepository

# How often a task waiting on another node's turn asks again (grows to the second).
_FIRST_POLL = 0.05
_MAX_POLL = 0.5


@dataclass(frozen=True)
class ClusterClaims:
    """What the cluster-wide claim needs: the store, and who this node is."""

    repo: SessionTurnRepository
    node_id: str
    owner: str


class SessionTurns:
    def __init__(self, claims: ClusterClaims | None = None) -> None:
        self._claims = claims
        # A lock per session, dropped once nobody holds or waits on it.
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, session_id: str, task_id: str) -> AsyncIterator[None]:
        """Hold the session's turn for ``task_id`` (waiting for it as long as it takes)."""
        lock, users = self._locks.get(session_id, (asyncio.Lock(), 0))
        self._locks[session_id] = (lock, users + 1)
        try:
            async with lock:
                if self._claims is None:
                    yield
                    return
                await self._claim(self._claims, session_id, task_id)
                try:
                    yield
                finally:
                    await asyncio.shield(self._claims.repo.release(session_id, self._claims.owner))
        finally:
            lock, users = self._locks[session_id]
            if users == 1:
                del self._locks[session_id]
            else:
                self._locks[session_id] = (lock, users - 1)

    @staticmethod
    async def _claim(claims: ClusterClaims, session_id: str, task_id: str) -> None:
        poll = _FIRST_POLL
        while not await claims.repo.try_claim(
            session_id, task_id, claims.node_id, claims.owner, time.time()
        ):
            await asyncio.sleep(poll)
            poll = min(poll * 2, _MAX_POLL)
