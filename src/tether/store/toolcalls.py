"""Tool-call rows and their output chunks (the full copy behind the in-memory buffer)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from tether.store.batches import batches
from tether.store.database import Database
from tether.store.owners import owned_by
from tether.store.records import OutputChunk, ToolCallRecord
from tether.store.rows import columns_of, record_values, to_record
from tether.store.tables import tool_calls, tool_output

#: Statuses of a call that has not ended.
UNFINISHED = ("running", "offloaded", "awaiting_approval")

# Built once: on several nodes every list of a session's calls runs this query, and
# building the statement cost a fifth of its time.
_UNFINISHED_IN_SESSION = (
    sa.select(tool_calls)
    .where(
        tool_calls.c.session_id == sa.bindparam("session_id"),
        tool_calls.c.status.in_(UNFINISHED),
    )
    .order_by(tool_calls.c.started_at)
)


# Built once too (every call runs them); the SET columns are the parameters' keys.
_INSERT_CALL = tool_calls.insert()
# An ended call's row is final: neither an update nor a second end changes it.
_UPDATE_CALL = sa.update(tool_calls).where(
    tool_calls.c.id == sa.bindparam("b_id"), tool_calls.c.status.in_(UNFINISHED)
)
_INSERT_OUTPUT = tool_output.insert()


# Columns whose change no list of calls shows (so no other node needs to hear of it).
_UNLISTED = frozenset({"pgid"})


def _nobody_listens(session_id: str | None) -> None:
    return None


class ToolCallRepository:
    def __init__(self, db: Database, owner: str | None = None) -> None:
        self._db = db
        self._owner = owner
        self._changed: Callable[[str | None], None] = _nobody_listens

    def report_changes(self, changed: Callable[[str | None], None]) -> None:
        """Call ``changed(session_id)`` after every committed write that changes what a
        list of the session's unfinished calls shows (None: possibly any session's).
        With several nodes, this is how the others hear of it."""
        self._changed = changed

    # A change is announced even when the write failed or was cancelled mid-commit: an
    # announcement too many costs a read, one too few a stale list.

    async def insert(self, record: ToolCallRecord) -> None:
        values = record_values(record, exclude=("owner",))
        values["owner"] = self._owner
        await self._db.write_grouped(
            _INSERT_CALL,
            columns_of(tool_calls, values),
            then=lambda: self._changed(record.session_id),
        )

    async def update(self, call_id: str, *, session_id: str | None = None, **values: Any) -> None:
        """Set ``values`` on the call's row unless it has ended (an ended call's row is
        final); ``session_id``: the call's session, for the announcement (None
        announces a change to any session)."""
        listed = not values.keys() <= _UNLISTED
        await self._db.write_grouped(
            _UPDATE_CALL,
            {"b_id": call_id, **columns_of(tool_calls, values)},
            then=lambda: self._changed(session_id) if listed else None,
        )

    async def record_end(
        self,
        call_id: str,
        *,
        session_id: str | None = None,
        output: Sequence[OutputChunk] = (),
        **values: Any,
    ) -> bool:
        """Record the call's end, unless an end is recorded already: a call ends once,
        and the first end stands (a survivor may have ended it as "node lost" while the
        node running it was cut off). False if it had ended. ``output``: the last chunks
        not yet stored, stored in the same transaction."""
        try:
            async with self._db.write() as conn:
                await _insert_output(conn, call_id, output)
                result = await conn.execute(
                    _UPDATE_CALL,
                    {"b_id": call_id, "status": "completed", **columns_of(tool_calls, values)},
                )
                return bool(result.rowcount)
        finally:
            self._changed(session_id)

    async def ended_among(self, call_ids: Collection[str]) -> set[str]:
        """Which of ``call_ids`` the store shows as ended."""
        ended: set[str] = set()
        async with self._db.read() as conn:
            for batch in batches(call_ids):
                rows = await conn.execute(
                    sa.select(tool_calls.c.id).where(
                        tool_calls.c.id.in_(batch), tool_calls.c.status == "completed"
                    )
                )
                ended.update(r.id for r in rows)
        return ended

    async def get(self, session_id: str, call_id: str) -> ToolCallRecord | None:
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    sa.select(tool_calls).where(
                        tool_calls.c.id == call_id, tool_calls.c.session_id == session_id
                    )
                )
            ).first()
            return to_record(ToolCallRecord, row) if row else None

    async def list_for_session(self, session_id: str, limit: int = 200) -> list[ToolCallRecord]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tool_calls)
                .where(tool_calls.c.session_id == session_id)
                .order_by(tool_calls.c.started_at.desc())
                .limit(limit)
            )
            return [to_record(ToolCallRecord, r) for r in rows]

    async def append_output(self, call_id: str, chunks: Sequence[OutputChunk]) -> None:
        if not chunks:
            return
        async with self._db.write() as conn:
            await _insert_output(conn, call_id, chunks)

    async def read_output(self, call_id: str, after_seq: int = 0) -> list[OutputChunk]:
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tool_output)
                .where(tool_output.c.tool_call_id == call_id, tool_output.c.seq > after_seq)
                .order_by(tool_output.c.seq)
            )
            return [OutputChunk(seq=r.seq, stream=r.stream, text=r.text) for r in rows]

    async def unfinished_owners(self) -> set[str | None]:
        """The owners (servers) of calls not yet finished."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tool_calls.c.owner).where(tool_calls.c.status.in_(UNFINISHED)).distinct()
            )
            return {r.owner for r in rows}

    async def interrupt_unfinished(
        self,
        reason: str,
        owners: Collection[str | None],
        keep: Collection[str] = (),
        end_state: str = "cancelled",
        unanswered: tuple[str, str] | None = None,
    ) -> list[tuple[int, float]]:
        """Record the unfinished calls of ``owners`` (servers that are gone) as ended in
        ``end_state``, but those in ``keep`` (adopted: they run on). With
        ``unanswered`` (the reason, and what the model is told), those still awaiting
        approval are recorded denied instead: they never ran, and no one can answer for
        them now.

        Returns (process group, start time) of each, so the caller can reap survivors.
        """
        theirs = sa.and_(
            tool_calls.c.status.in_(UNFINISHED),
            owned_by(tool_calls.c.owner, owners),
            tool_calls.c.id.not_in(list(keep)),
        )
        ends = [(theirs, {"end_state": end_state, "end_reason": reason})]
        if unanswered is not None:
            waiting = sa.and_(theirs, tool_calls.c.status == "awaiting_approval")
            why, told = unanswered
            ends.insert(0, (waiting, {"end_state": "denied", "end_reason": why, "result": told}))
        ended = 0
        async with self._db.write() as conn:
            rows = await conn.execute(
                sa.select(tool_calls.c.pgid, tool_calls.c.started_at).where(
                    theirs, tool_calls.c.pgid.is_not(None)
                )
            )
            pgids = [(int(r.pgid), float(r.started_at)) for r in rows]
            for where, values in ends:
                result = await conn.execute(
                    sa.update(tool_calls)
                    .where(where)
                    .values(status="completed", finished_at=time.time(), **values)
                )
                ended += result.rowcount
        if ended:
            self._changed(None)
        return pgids

    async def last_output_seq(self, call_id: str) -> int:
        """The number of the last output chunk stored for the call (0: none)."""
        async with self._db.read() as conn:
            last = await conn.scalar(
                sa.select(sa.func.max(tool_output.c.seq)).where(
                    tool_output.c.tool_call_id == call_id
                )
            )
            return int(last or 0)

    async def unfinished(self) -> list[ToolCallRecord]:
        """Calls recorded as not yet completed, oldest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tool_calls)
                .where(tool_calls.c.status.in_(UNFINISHED))
                .order_by(tool_calls.c.started_at)
            )
            return [to_record(ToolCallRecord, r) for r in rows]

    async def unfinished_in_session(self, session_id: str) -> list[ToolCallRecord]:
        """A session's calls not yet completed, on any node, oldest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(_UNFINISHED_IN_SESSION, {"session_id": session_id})
            return [to_record(ToolCallRecord, r) for r in rows]

    async def take_over(self, call_ids: Collection[str]) -> None:
        """Record this server as the owner of ``call_ids`` (calls it adopted), so that
        no later server takes them for a dead server's leftovers."""
        if not call_ids:
            return
        async with self._db.write() as conn:
            for batch in batches(call_ids):
                await conn.execute(
                    sa.update(tool_calls)
                    .where(tool_calls.c.id.in_(batch))
                    .values(owner=self._owner)
                )
        self._changed(None)

    async def list_for_task(self, task_id: str) -> list[ToolCallRecord]:
        """Every call a task started, oldest first."""
        async with self._db.read() as conn:
            rows = await conn.execute(
                sa.select(tool_calls)
                .where(tool_calls.c.task_id == task_id)
                .order_by(tool_calls.c.started_at)
            )
            return [to_record(ToolCallRecord, r) for r in rows]

    async def known_ids(self, call_ids: Sequence[str]) -> set[str]:
        """Which of ``call_ids`` have a row."""
        known: set[str] = set()
        async with self._db.read() as conn:
            for batch in batches(call_ids):
                rows = await conn.execute(
                    sa.select(tool_calls.c.id).where(tool_calls.c.id.in_(batch))
                )
                known.update(r.id for r in rows)
        return known


async def _insert_output(
    conn: AsyncConnection, call_id: str, chunks: Sequence[OutputChunk]
) -> None:
    if chunks:
        await conn.execute(
            _INSERT_OUTPUT,
            [
                {"tool_call_id": call_id, "seq": c.seq, "stream": c.stream, "text": c.text}
                for c in chunks
            ],
        )
