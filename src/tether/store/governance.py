"""Governance state: approval requests, the decision audit trail and the user rules."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection
from typing import Any

import sqlalchemy as sa

from tether.store.database import Database
from tether.store.records import ApprovalRecord, AuditEntry, AuditQuery, AuditRecord
from tether.store.rows import columns_of, record_values, to_record
from tether.store.tables import app_settings, approvals, governance_audit, tool_calls
from tether.store.toolcalls import UNFINISHED

_USER_RULES_KEY = "governance.user_rules"
# Built once: every call is audited.
_INSERT_AUDIT = governance_audit.insert()


class GovernanceRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    # ----------------------------------------------------------------- approvals

    async def add_approval(self, record: ApprovalRecord) -> None:
        async with self._db.write() as conn:
            await conn.execute(approvals.insert().values(**record_values(record)))

    async def decide_approval(
        self, request_id: str, status: str, decided_by: str, reason: str | None
    ) -> bool:
        """Record the decision on a pending request; False if it was not pending."""
        async with self._db.write() as conn:
            result = await conn.execute(
                sa.update(approvals)
                .where(approvals.c.request_id == request_id, approvals.c.status == "pending")
                .values(status=status, decided_by=decided_by, reason=reason, decided_at=time.time())
            )
            return result.rowcount > 0

    async def get_approval(self, request_id: str) -> ApprovalRecord | None:
        async with self._db.read() as conn:
            row = (
                await conn.execute(sa.select(approvals).where(approvals.c.request_id == request_id))
            ).first()
            return to_record(ApprovalRecord, row) if row else None

    async def pending_approvals(self, session_id: str | None) -> list[ApprovalRecord]:
        """Requests still pending on any node, oldest first, for one session or all."""
        query = sa.select(approvals).where(approvals.c.status == "pending")
        if session_id is not None:
            query = query.where(approvals.c.session_id == session_id)
        async with self._db.read() as conn:
            rows = await conn.execute(query.order_by(approvals.c.created_at))
            return [to_record(ApprovalRecord, r) for r in rows]

    async def waiting_owner(self, request_id: str, waiting: bool = False) -> str | None:
        """The server whose call waits on the request (the owner of its tool call);
        ``waiting``: only while the request is pending and its call unfinished (None
        otherwise)."""
        query = (
            sa.select(tool_calls.c.owner)
            .join(approvals, approvals.c.tool_call_id == tool_calls.c.id)
            .where(approvals.c.request_id == request_id)
        )
        if waiting:
            query = query.where(
                approvals.c.status == "pending", tool_calls.c.status.in_(UNFINISHED)
            )
        async with self._db.read() as conn:
            owner = await conn.scalar(query)
            return str(owner) if owner is not None else None

    async def deny_pending_approvals(
        self, decided_by: str, reason: str, owners: Collection[str] | None = None
    ) -> list[ApprovalRecord]:
        """Deny the requests left pending by a server that is gone, and return them as
        they were.

        A request whose call is still unfinished belongs to a live server (start-up
        recovery has already ended the calls of the dead ones) and is left alone. With
        ``owners`` (a lost node's), only the requests of their calls are denied: a live
        node whose call has just ended settles that call's request itself.
        """
        live_calls = sa.select(tool_calls.c.id).where(tool_calls.c.status.in_(UNFINISHED))
        leftover = sa.and_(
            approvals.c.status == "pending", approvals.c.tool_call_id.not_in(live_calls)
        )
        if owners is not None:
            theirs = sa.select(tool_calls.c.id).where(tool_calls.c.owner.in_(list(owners)))
            leftover = sa.and_(leftover, approvals.c.tool_call_id.in_(theirs))
        async with self._db.write() as conn:
            rows = await conn.execute(sa.select(approvals).where(leftover))
            pending = [to_record(ApprovalRecord, r) for r in rows]
            if pending:
                await conn.execute(
                    sa.update(approvals)
                    .where(approvals.c.request_id.in_([p.request_id for p in pending]))
                    .where(approvals.c.status == "pending")
                    .values(
                        status="denied",
                        decided_by=decided_by,
                        reason=reason,
                        decided_at=time.time(),
                    )
                )
            return pending

    # ----------------------------------------------------------------- audit

    async def add_audit(self, entry: AuditEntry) -> None:
        values = {**dataclasses.asdict(entry), "created_at": time.time()}
        await self._db.write_grouped(_INSERT_AUDIT, columns_of(governance_audit, values))

    async def list_audit(self, session_id: str | None, limit: int) -> list[AuditRecord]:
        """Decisions, newest first, for one session or all."""
        query = sa.select(governance_audit).order_by(governance_audit.c.id.desc()).limit(limit)
        if session_id is not None:
            query = query.where(governance_audit.c.session_id == session_id)
        async with self._db.read() as conn:
            return [to_record(AuditRecord, r) for r in await conn.execute(query)]

    async def audit_page(self, query: AuditQuery, after_id: int, limit: int) -> list[AuditRecord]:
        """Decisions matching ``query`` with an id above ``after_id``, oldest first."""
        table = governance_audit
        conditions = [table.c.id > after_id]
        if query.since is not None:
            conditions.append(table.c.created_at >= query.since)
        if query.until is not None:
            conditions.append(table.c.created_at < query.until)
        if query.session_id is not None:
            conditions.append(table.c.session_id == query.session_id)
        if query.outcome is not None:
            conditions.append(table.c.outcome == query.outcome)
        statement = sa.select(table).where(*conditions).order_by(table.c.id).limit(limit)
        async with self._db.read() as conn:
            return [to_record(AuditRecord, r) for r in await conn.execute(statement)]

    # ----------------------------------------------------------------- user rules

    async def get_user_rules(self) -> list[dict[str, Any]]:
        async with self._db.read() as conn:
            value = await conn.scalar(
                sa.select(app_settings.c.value).where(app_settings.c.key == _USER_RULES_KEY)
            )
            return list(value) if isinstance(value, list) else []

    async def set_user_rules(self, rules: list[dict[str, Any]]) -> None:
        async with self._db.write() as conn:
            await conn.execute(sa.delete(app_settings).where(app_settings.c.key == _USER_RULES_KEY))
            await conn.execute(app_settings.insert().values(key=_USER_RULES_KEY, value=rules))
