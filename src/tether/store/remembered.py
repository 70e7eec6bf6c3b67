"""Remembered decisions: a person's approve or deny kept for later calls."""

from __future__ import annotations

import sqlalchemy as sa

from tether.store.database import Database
from tether.store.records import RememberedRule
from tether.store.rows import record_values, to_record
from tether.store.tables import remembered_rules


class RememberedRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, rule: RememberedRule) -> None:
        async with self._db.write() as conn:
            await conn.execute(remembered_rules.insert().values(**record_values(rule)))

    async def list_all(self) -> list[RememberedRule]:
        """Every remembered rule, oldest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(remembered_rules).order_by(remembered_rules.c.created_at)
            )
            return [to_record(RememberedRule, r) for r in rows]

    async def denials(self) -> list[RememberedRule]:
        """Every remembered deny, oldest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(remembered_rules)
                .where(remembered_rules.c.action == "deny")
                .order_by(remembered_rules.c.created_at)
            )
            return [to_record(RememberedRule, r) for r in rows]

    async def for_call(self, tool_name: str, session_id: str) -> list[RememberedRule]:
        """The rules that may decide a call of ``tool_name`` in ``session_id`` (the
        session's and those kept always), oldest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(remembered_rules)
                .where(
                    remembered_rules.c.tool_name == tool_name,
                    sa.or_(
                        remembered_rules.c.session_id.is_(None),
                        remembered_rules.c.session_id == session_id,
                    ),
                )
                .order_by(remembered_rules.c.created_at)
            )
            return [to_record(RememberedRule, r) for r in rows]

    async def delete(self, rule_id: str) -> bool:
        """Revoke one rule; False if there was none with that id."""
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.delete(remembered_rules).where(remembered_rules.c.id == rule_id)
            )
            return result.rowcount > 0
