"""SQLAlchemy's aiosqlite adapter, with one thread hop per statement instead of four.

aiosqlite runs every sqlite3 call on its own thread; SQLAlchemy's adapter makes a
separate round trip for creating the cursor, executing, fetching and closing it, and
another to roll back a connection that has no transaction. Each round trip wakes the
event loop through its self-pipe. A chat turn makes about twenty statements, and these
hops were the largest share of the server's CPU in a profile (py-spy, bench_chat).
Here one statement is one hop (cursor, execute, fetch and close run together on the
worker thread), and commit and rollback are skipped when sqlite has no transaction.

It builds on SQLAlchemy's adapter classes (``sqlalchemy.dialects.sqlite.aiosqlite``);
the whole store test suite runs through it.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from typing import Any, cast

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

_Result = tuple[Any, int, int | None, list[Any]]


def _run_statement(conn: sqlite3.Connection, operation: str, params: Any, many: bool) -> _Result:
    """On the worker thread: the whole life of one cursor."""
    cursor = conn.cursor()
    try:
        if many:
            cursor.executemany(operation, params)
        elif params is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, params)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


class OneHopCursor(AsyncAdapt_aiosqlite_cursor):
    """A cursor whose statements each run in one trip to the worker thread."""

    __slots__ = ("_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: Any) -> None:
        # No aiosqlite cursor is made here (that was a round trip of its own).
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> int:
        return self._lastrowid  # type: ignore[return-value]

    async def _async_soft_close(self) -> None:
        return None

    def close(self) -> None:
        self._rows.clear()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        self._run(operation, parameters, many=False)

    def executemany(self, operation: Any, seq_of_parameters: Sequence[Any]) -> Any:
        self._run(operation, seq_of_parameters, many=True)

    def _run(self, operation: Any, params: Any, many: bool) -> None:
        try:
            result = await_(self._run_async(operation, params, many))
        except Exception as error:
            self._adapt_connection._handle_exception(error)
        self._description, self._rowcount, self._lastrowid, rows = result
        self._rows = collections.deque(rows)

    async def _run_async(self, operation: Any, params: Any, many: bool) -> _Result:
        connection = cast(aiosqlite.Connection, self._connection)
        async with self._adapt_connection._execute_mutex:
            # aiosqlite's own way to run a function on its thread (what its cursor uses).
            result: _Result = await connection._execute(  # type: ignore[no-untyped-call]
                _run_statement, connection._conn, operation, params, many
            )
            return result


class OneHopConnection(AsyncAdapt_aiosqlite_connection):
    """Skips commit and rollback when sqlite has no transaction open."""

    __slots__ = ()
    _cursor_cls = OneHopCursor

    def rollback(self) -> None:
        if self._connection._connection and self._connection.in_transaction:
            super().rollback()

    def commit(self) -> None:
        if self._connection._connection and self._connection.in_transaction:
            super().commit()


class OneHopDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """The DBAPI module SQLAlchemy is given (``create_async_engine(..., module=...)``)."""

    def __init__(self) -> None:
        super().__init__(aiosqlite, sqlite3)

    def connect(self, *arg: Any, **kw: Any) -> OneHopConnection:
        adapted = super().connect(*arg, **kw)
        return OneHopConnection(self, adapted._connection)
