"""Chat sessions and their messages."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from tether.store.database import Database
from tether.store.records import MessageRecord, SessionRecord
from tether.store.rows import to_record
from tether.store.tables import (
    chat_sessions,
    deliveries,
    messages,
    remembered_rules,
    tasks,
    tool_calls,
    tool_output,
)


def _new_session(
    session_id: str, user_id: str, channel: str, title: str | None, now: float
) -> dict[str, Any]:
    return {
        "id": session_id,
        "user_id": user_id,
        "channel": channel,
        "title": title,
        "approval_level": None,
        "created_at": now,
        "updated_at": now,
    }


def _session_upsert(is_sqlite: bool) -> sa.Insert:
    """Create a session, or touch its ``updated_at`` if it exists: one statement (an
    update, then an insert when it found no row, was two on every first message)."""
    insert = (sqlite.insert if is_sqlite else postgresql.insert)(chat_sessions)
    return insert.on_conflict_do_update(
        index_elements=[chat_sessions.c.id], set_={"updated_at": insert.excluded.updated_at}
    )


async def ensure_session_in(
    conn: AsyncConnection,
    db: Database,
    session_id: str,
    user_id: str,
    channel: str,
    title: str | None,
    now: float,
) -> None:
    """Within the transaction ``conn``: create the session if it is new; otherwise touch
    its ``updated_at``."""
    upsert = _UPSERT_SQLITE if db.is_sqlite else _UPSERT_POSTGRESQL
    await conn.execute(upsert, _new_session(session_id, user_id, channel, title, now))


async def insert_messages(
    conn: AsyncConnection,
    session_id: str,
    task_id: str | None,
    entries: Sequence[tuple[str, dict[str, Any]]],
    now: float,
) -> None:
    """Within the transaction ``conn``: insert messages as (kind, payload) pairs, in
    order (the session's ``updated_at`` is the caller's to touch)."""
    await conn.execute(
        _INSERT_MESSAGE,
        [
            {
                "session_id": session_id,
                "task_id": task_id,
                "kind": kind,
                "payload": payload,
                "created_at": now,
            }
            for kind, payload in entries
        ],
    )


# Built once: a turn runs these several times, and building a statement costs about as
# much CPU as executing it.
_UPSERT_SQLITE = _session_upsert(is_sqlite=True)
_UPSERT_POSTGRESQL = _session_upsert(is_sqlite=False)
_INSERT_MESSAGE = messages.insert()
_TOUCH_SESSION = sa.update(chat_sessions).where(chat_sessions.c.id == sa.bindparam("b_id"))
_SESSION = sa.select(chat_sessions).where(chat_sessions.c.id == sa.bindparam("session_id"))
_HISTORY = (
    sa.select(messages)
    .where(messages.c.session_id == sa.bindparam("session_id"))
    .order_by(messages.c.id)
)


async def _append(
    conn: AsyncConnection,
    session_id: str,
    task_id: str | None,
    entries: Sequence[tuple[str, dict[str, Any]]],
) -> None:
    now = time.time()
    await insert_messages(conn, session_id, task_id, entries, now)
    # A chat's updated_at says when it last changed, as QwenPaw's does.
    await conn.execute(_TOUCH_SESSION, {"b_id": session_id, "updated_at": now})


class ChatRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def ensure_session(
        self, session_id: str, user_id: str, channel: str, title: str | None
    ) -> None:
        """Create the session if it is new; otherwise touch its `updated_at`."""
        async with self._db.write() as conn:
            await ensure_session_in(
                conn, self._db, session_id, user_id, channel, title, time.time()
            )

    async def create_session(
        self, session_id: str, user_id: str, channel: str, title: str | None
    ) -> bool:
        """Create the session unless it exists; True if it was created."""
        async with self._db.write() as conn:
            query = sa.select(chat_sessions.c.id).where(chat_sessions.c.id == session_id)
            if (await conn.execute(query)).first():
                return False
            await conn.execute(
                chat_sessions.insert(),
                _new_session(session_id, user_id, channel, title, time.time()),
            )
            return True

    async def get_session(self, session_id: str) -> SessionRecord | None:
        async with self._db.read() as conn:
            row = (await conn.execute(_SESSION, {"session_id": session_id})).first()
            return to_record(SessionRecord, row) if row else None

    async def list_sessions(self) -> list[SessionRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(chat_sessions).order_by(chat_sessions.c.updated_at.desc())
            )
            return [to_record(SessionRecord, r) for r in rows]

    async def sandbox_settings(self, session_id: str) -> dict[str, Any] | None:
        """The session's sandbox settings (None: none of its own, or no such session)."""
        session = await self.get_session(session_id)
        return session.sandbox if session is not None else None

    async def update_session(self, session_id: str, values: dict[str, Any]) -> bool:
        """Set the given columns of a session (its settings approval_level,
        when_unattended, sandbox; a rename's title and updated_at); False if no such
        session."""
        async with self._db.write() as conn:
            query = sa.update(chat_sessions).where(chat_sessions.c.id == session_id)
            # With nothing to change, the update still says whether the session exists.
            query = query.values(**values) if values else query.values(id=chat_sessions.c.id)
            result = await conn.execute(query)
            return result.rowcount > 0

    async def delete_session(self, session_id: str) -> bool:
        """Remove a session with its messages, tasks, tool calls and their output."""
        async with self._db.write() as conn:
            call_ids = sa.select(tool_calls.c.id).where(tool_calls.c.session_id == session_id)
            await conn.execute(
                sa.delete(tool_output).where(tool_output.c.tool_call_id.in_(call_ids))
            )
            # Decisions remembered for it too: a session made later under the same id
            # (ids are the clients') would inherit them.
            for table in (tool_calls, messages, tasks, deliveries, remembered_rules):
                await conn.execute(sa.delete(table).where(table.c.session_id == session_id))
            result = await conn.execute(
                sa.delete(chat_sessions).where(chat_sessions.c.id == session_id)
            )
            return result.rowcount > 0

    async def append(
        self, session_id: str, task_id: str | None, entries: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        """Persist messages as (kind, payload) pairs, in order, in one transaction."""
        if not entries:
            return
        async with self._db.write() as conn:
            await _append(conn, session_id, task_id, entries)

    async def append_to_turn(
        self, session_id: str, task_id: str, entries: Sequence[tuple[str, dict[str, Any]]]
    ) -> bool:
        """As :meth:`append`, for the running turn of ``task_id``: False, and nothing
        written, if the task has ended meanwhile. A turn's task ends after its turn, so
        it has ended only if another node ended it: a survivor failed it, having declared
        this node lost while it was frozen or cut off, and another node's turn may hold
        the session now. The task's row is locked for the write, so a survivor's failing
        it lands either before (nothing written) or after."""
        if not entries:
            return True
        async with self._db.write() as conn:
            status = await conn.scalar(
                sa.select(tasks.c.status).where(tasks.c.id == task_id).with_for_update()
            )
            if status == "finished":
                return False
            await _append(conn, session_id, task_id, entries)
        return True

    async def history(self, session_id: str) -> list[MessageRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(_HISTORY, {"session_id": session_id})
            return [to_record(MessageRecord, r) for r in rows]

    async def task_messages(self, task_id: str) -> list[MessageRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(messages).where(messages.c.task_id == task_id).order_by(messages.c.id)
            )
            return [to_record(MessageRecord, r) for r in rows]
