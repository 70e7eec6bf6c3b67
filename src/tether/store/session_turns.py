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
        self, session_id: str, task_id: str, node_id: str, owner: str, now: float
    ) -> bool:
        """Take the session's turn for ``task_id`` unless a live node holds it.

        A claim is free when the process that made it is known to be gone: an earlier
        run of this very node (same node id, another owner), or a holder whose lease a
        survivor removed (declaring it dead: its turns are failed, and if it was only
        frozen it stops them when it finds its lease gone) or that another run of its
        node took back. A lease that has only run out is not enough: its node may renew
        before any survivor declares it dead, and it would go on with its turn as if
        nothing had happened. Taking a claim is a conditional update on the holder read,
        so of several nodes trying at once, one wins.
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
                if row.owner != owner and not await _is_gone(conn, row.node_id, row.owner, node_id):
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


async def _is_gone(
    conn: AsyncConnection, holder_node: str, holder_owner: str, node_id: str
) -> bool:
    """Whether the process that made a claim (``holder_owner`` on ``holder_node``) is
    gone (see ``try_claim``)."""
    if holder_node == node_id:
        return True  # this node's earlier run (its owner differs): gone
    lease = (await conn.execute(sa.select(nodes.c.owner).where(nodes.c.id == holder_node))).first()
    return lease is None or (lease.owner is not None and lease.owner != holder_owner)
