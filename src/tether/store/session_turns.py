"""Claims on a session's turn, so that several nodes never run two turns of one session
at once (one node's own turns are kept apart in memory, see tasks/session_turns.py)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tether.store.database import Database
from tether.store.tables import nodes, session_turns


class SessionTurnRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def try_claim(
        self,
        session_id: str,
        task_id: str,
        node_id: str,
        owner: str,
        now: float,
        lease_seconds: float,
    ) -> bool:
        """Take the session's turn for ``task_id`` unless a live node holds it.

        A claim is free when its node's lease ran out (or is gone), or when it was made
        by an earlier run of this very node (same node id, another owner). Taking one is
        a conditional update on the holder read, so of several nodes trying at once,
        one wins.
        """
        values = {"task_id": task_id, "node_id": node_id, "owner": owner, "claimed_at": now}
        try:
            async with self._db.write() as conn:
                row = (
                    await conn.execute(
                        sa.select(session_turns).where(session_turns.c.session_id == session_id)
                    )
                ).first()
                if row is None:
                    await conn.execute(
                        session_turns.insert().values(session_id=session_id, **values)
                    )
                    return True
                if row.owner != owner and not await _is_stale(
                    conn, row.node_id, node_id, now - lease_seconds
                ):
                    return False
                taken = await conn.execute(
                    sa.update(session_turns)
                    .where(
                        session_turns.c.session_id == session_id,
                        session_turns.c.owner == row.owner,
                        session_turns.c.claimed_at == row.claimed_at,
                    )
                    .values(**values)
                )
                return bool(taken.rowcount)
        except sa.exc.IntegrityError:
            return False  # another node inserted the first claim at the same moment

    async def release(self, session_id: str, owner: str) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                sa.delete(session_turns).where(
                    session_turns.c.session_id == session_id, session_turns.c.owner == owner
                )
            )


async def _is_stale(
    conn: AsyncConnection, holder_node: str, node_id: str, renewed_since: float
) -> bool:
    if holder_node == node_id:
        return True  # this node's earlier run (its owner differs): gone
    renewed = await conn.scalar(sa.select(nodes.c.renewed_at).where(nodes.c.id == holder_node))
    return renewed is None or renewed < renewed_since
