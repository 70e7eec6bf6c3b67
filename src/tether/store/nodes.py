"""The nodes sharing this database, each with a lease it renews."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import sqlalchemy as sa

from tether.store.database import Database
from tether.store.records import NodeRecord
from tether.store.rows import to_record
from tether.store.tables import nodes
from tether.waits import to_the_end

# The first key of the advisory locks taken while a node's loss is settled (the second
# is the node id's hash); the schema's lock is a one-key lock, which never meets these.
_SETTLING_LOCKS = 0x7E7E_0017


def _int4(node_id: str) -> int:
    value = zlib.crc32(node_id.encode())
    return value - 2**32 if value >= 2**31 else value


class NodeRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    @asynccontextmanager
    async def settling(self, node_id: str) -> AsyncIterator[None]:
        """Held by a survivor while it declares ``node_id`` dead and ends its rows, and by
        that node while it takes its lease, so the two never overlap: a node that comes
        back as it is declared dead finds its rows ended before it recovers them, never
        in the middle. On PostgreSQL (nodes on several machines) an advisory lock; a
        SQLite file's nodes share one machine's lock files, and nothing is taken."""
        if self._db.is_sqlite:
            yield
            return
        keys = (_SETTLING_LOCKS, _int4(node_id))
        async with self._db.read() as conn:
            await conn.execute(sa.select(sa.func.pg_advisory_lock(*keys)))
            try:
                yield
            finally:
                # Unlocked even when cancelled: a pooled connection would hold it for ever.
                await to_the_end(conn.execute(sa.select(sa.func.pg_advisory_unlock(*keys))))

    async def join(self, node_id: str, owner: str | None, version: str, now: float) -> None:
        """Take (or take back, after a restart) the lease of ``node_id``, held by the
        process whose owner id is ``owner``."""
        values = {
            "owner": owner,
            "version": version,
            "started_at": now,
            "renewed_at": now,
            "live_calls": 0,
            "running_tasks": 0,
        }
        async with self._db.write() as conn:
            updated = await conn.execute(
                sa.update(nodes).where(nodes.c.id == node_id).values(**values)
            )
            if updated.rowcount == 0:
                await conn.execute(nodes.insert().values(id=node_id, **values))

    async def renew(self, node_id: str, now: float, live_calls: int, running_tasks: int) -> bool:
        """Extend the lease; False if the row is gone (another node removed it as dead)."""
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.update(nodes)
                .where(nodes.c.id == node_id)
                .values(renewed_at=now, live_calls=live_calls, running_tasks=running_tasks)
            )
            return bool(result.rowcount)

    async def leave(self, node_id: str) -> None:
        """Give the lease up at a clean shutdown."""
        async with self._db.write() as conn:
            await conn.execute(sa.delete(nodes).where(nodes.c.id == node_id))

    async def expired(self, renewed_before: float) -> list[NodeRecord]:
        """Nodes whose last renewal is older than ``renewed_before``."""
        async with self._db.read() as conn:
            rows = await conn.execute(sa.select(nodes).where(nodes.c.renewed_at < renewed_before))
            return [to_record(NodeRecord, r) for r in rows]

    async def live_owners(self, renewed_since: float, except_node: str) -> set[str]:
        """The owner ids held by leases renewed at or after ``renewed_since``, but that of
        ``except_node`` (the asking node's row holds its last run's owner until it
        joins)."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(nodes.c.owner).where(
                    nodes.c.renewed_at >= renewed_since,
                    nodes.c.id != except_node,
                    nodes.c.owner.is_not(None),
                )
            )
            return {r.owner for r in rows}

    async def claim_dead(self, node: NodeRecord) -> bool:
        """Remove a dead node's lease, unless it renewed since it was read; True for the one
        caller that removed it (several survivors may try at once)."""
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.delete(nodes).where(nodes.c.id == node.id, nodes.c.renewed_at == node.renewed_at)
            )
            return bool(result.rowcount)

    async def all(self) -> list[NodeRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(sa.select(nodes).order_by(nodes.c.id))
            return [to_record(NodeRecord, r) for r in rows]
