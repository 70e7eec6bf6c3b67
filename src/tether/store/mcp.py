"""MCP client configurations."""

from __future__ import annotations

import time

import sqlalchemy as sa

from tether.store.database import Database
from tether.store.records import McpClientRecord
from tether.store.rows import to_record
from tether.store.tables import mcp_clients


class McpClientRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self) -> list[McpClientRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(sa.select(mcp_clients).order_by(mcp_clients.c.created_at))
            return [to_record(McpClientRecord, r) for r in rows]

    async def get(self, key: str) -> McpClientRecord | None:
        async with self._db.read() as conn:
            row = (
                await conn.execute(sa.select(mcp_clients).where(mcp_clients.c.key == key))
            ).first()
            return to_record(McpClientRecord, row) if row else None

    async def insert(self, record: McpClientRecord) -> bool:
        """Add a client; False if the key is taken."""
        now = time.time()
        async with self._db.write() as conn:
            taken = await conn.scalar(
                sa.select(sa.func.count()).where(mcp_clients.c.key == record.key)
            )
            if taken:
                return False
            await conn.execute(
                mcp_clients.insert().values(
                    key=record.key,
                    spec=record.spec,
                    secrets_encrypted=record.secrets_encrypted,
                    created_at=now,
                    updated_at=now,
                )
            )
            return True

    async def replace(self, record: McpClientRecord) -> bool:
        """Store a new configuration for an existing client; False if there is none."""
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.update(mcp_clients)
                .where(mcp_clients.c.key == record.key)
                .values(
                    spec=record.spec,
                    secrets_encrypted=record.secrets_encrypted,
                    updated_at=time.time(),
                )
            )
            return result.rowcount > 0

    async def reseal(self, record: McpClientRecord, was: McpClientRecord) -> None:
        """Store ``record`` (the same configuration sealed anew) unless the client changed
        since it was read as ``was``: a change another node made meanwhile stands."""
        stored = mcp_clients.c.secrets_encrypted
        async with self._db.write() as conn:
            await conn.execute(
                sa.update(mcp_clients)
                .where(
                    mcp_clients.c.key == record.key,
                    stored.is_(None)
                    if was.secrets_encrypted is None
                    else stored == was.secrets_encrypted,
                )
                .values(spec=record.spec, secrets_encrypted=record.secrets_encrypted)
            )

    async def delete(self, key: str) -> bool:
        async with self._db.write() as conn:
            result = await conn.execute(sa.delete(mcp_clients).where(mcp_clients.c.key == key))
            return result.rowcount > 0
