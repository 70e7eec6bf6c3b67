"""The database handle: engine, unit-of-work helpers, and the schema check at start."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.base import Executable

from tether.errors import Invalid, OutOfStorage
from tether.store import schema
from tether.store.group_commit import GroupCommit, Then, nothing
from tether.store.sqlite_driver import OneHopDBAPI
from tether.text import may_hold_surrogates, valid_data


def _load_json(text: str) -> object:
    """JSON columns as read: valid Unicode even if an older version stored an escaped
    unpaired surrogate, so no stored value can break a read."""
    value = json.loads(text)
    return valid_data(value) if may_hold_surrogates(text) else value


# PostgreSQL refuses text holding NUL (22021) and JSON escapes it cannot store (22P05);
# SQLite stores both. Either way it is the value, not the server, that is at fault.
_UNSTORABLE_STATES = frozenset({"22021", "22P05"})


class UnstorableValue(Invalid):
    """A value the database cannot hold (PostgreSQL: text with a NUL character)."""


# A database that cannot write: SQLite's primary result codes FULL, READONLY, CANTOPEN
# and IOERR (its extended codes keep the primary one in the low byte; a full disk is an
# IOERR when the write-ahead log cannot be made); PostgreSQL's disk_full and
# out_of_memory.
_SQLITE_UNWRITABLE = frozenset({13, 8, 14, 10})
_UNWRITABLE_STATES = frozenset({"53100", "53200"})


class StoreUnwritable(OutOfStorage):
    """The database refused a write for want of room or of permission."""


@contextmanager
def _store_errors_by_kind() -> Iterator[None]:
    """A refusal that is the value's fault, or the storage's, as that kind of error
    (a 422, a 507) rather than a fault of the server (a 500 and a traceback)."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) in _UNSTORABLE_STATES:
            raise UnstorableValue(
                "the text holds a character the database cannot store (a NUL byte?)"
            ) from exc
        code = getattr(exc.orig, "sqlite_errorcode", None)
        if (isinstance(code, int) and code & 0xFF in _SQLITE_UNWRITABLE) or getattr(
            exc.orig, "sqlstate", None
        ) in _UNWRITABLE_STATES:
            raise StoreUnwritable(
                f"the database cannot be written ({exc.orig}): its disk may be full (make "
                "room), or its file read-only; nothing of this write was kept"
            ) from exc
        raise


class Database:
    """One engine and the two ways to use it: ``read()`` and ``write()``.

    SQLite allows one writer at a time, so writes are serialised here with an asyncio
    lock rather than left to fail with "database is locked" under load. PostgreSQL takes
    concurrent writers (and other nodes write anyway), so there the lock is left out.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        base = _create_engine(url, self.is_sqlite)
        if self.is_sqlite:
            sa.event.listen(base.sync_engine, "connect", _sqlite_pragmas)
        # On PostgreSQL the pooled connections rest in autocommit and only writes open a
        # transaction. A read loses nothing by it (READ COMMITTED gives each statement of
        # a transaction its own snapshot anyway) and is one round trip instead of three
        # (BEGIN, the query, ROLLBACK); the pool's liveness check on every checkout is
        # one instead of three too (it wraps its ping in a transaction otherwise).
        self._reader: AsyncEngine = base
        #: Transactions: writes, migrations, and tests that set a database up.
        self.engine: AsyncEngine = (
            base if self.is_sqlite else base.execution_options(isolation_level="READ COMMITTED")
        )
        self._write_lock: AbstractAsyncContextManager[object] = (
            asyncio.Lock() if self.is_sqlite else nullcontext()
        )
        self._grouped = GroupCommit(self._transaction) if self.is_sqlite else None

    def _make_parent_directory(self) -> None:
        if self.is_sqlite:
            path = self.url.split("///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (``tether db upgrade``)."""
        async with self._schema_transaction() as conn:
            await conn.run_sync(schema.upgrade)

    async def open_checked(self) -> None:
        """Create the schema in an empty database; raise `schema.SchemaError` if an
        existing one is at another revision than this code's."""
        async with self._schema_transaction() as conn:
            await conn.run_sync(schema.ensure_current)

    @asynccontextmanager
    async def _schema_transaction(self) -> AsyncIterator[AsyncConnection]:
        """One transaction for a change of schema: it commits whole or not at all.

        On SQLite that takes an explicit BEGIN: Python's driver opens a transaction only
        before a change of rows, so each CREATE or ALTER was committed by itself. A
        first start (or an upgrade) killed half-way left tables without a revision,
        which no start nor `tether db upgrade` could go on from."""
        self._make_parent_directory()
        with _store_errors_by_kind():
            async with self.engine.begin() as conn:
                if self.is_sqlite:
                    await conn.exec_driver_sql("BEGIN IMMEDIATE")
                yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for queries."""
        async with self._reader.connect() as conn:
            with _store_errors_by_kind():
                yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction: committed when the block ends, rolled back if it raises.
        Committed after every grouped write asked for before it (``write_grouped``)."""
        if self._grouped is not None:
            await self._grouped.settled()
        async with self._transaction() as conn:
            yield conn

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection]:
        with _store_errors_by_kind():
            async with self._write_lock, self.engine.begin() as conn:
                yield conn

    async def write_grouped(
        self, statement: Executable, params: Mapping[str, Any], then: Then = nothing
    ) -> None:
        """One statement, returning once it is committed; ``then`` runs once its outcome
        is known, even if the caller was cancelled meanwhile. On SQLite in a transaction
        shared with the writes asked for at the same time (``group_commit``). Only for a
        write whose caller needs nothing back from it."""
        if self._grouped is not None:
            await self._grouped.execute(statement, params, then)
            return
        try:
            async with self._transaction() as conn:
                await conn.execute(statement, params)
        finally:
            then()

    async def close(self) -> None:
        """Commit the grouped writes asked for, then release every pooled connection."""
        if self._grouped is not None:
            await self._grouped.settled()
        await self.engine.dispose()


def shown_url(url: str) -> str:
    """The database URL with any password hidden, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


# Connections each node keeps open to PostgreSQL, and how many more it may open at a peak.
_POOL_SIZE = 10
_POOL_OVERFLOW = 10


def _create_engine(url: str, is_sqlite: bool) -> AsyncEngine:
    options: dict[str, Any] = {"pool_pre_ping": not is_sqlite, "json_deserializer": _load_json}
    if not is_sqlite:
        # SQLAlchemy's default pool keeps 5 connections and closes every one opened past
        # that as soon as it is returned: with a few more concurrent requests, each of
        # them paid a new PostgreSQL connection (a backend process, an SSL offer).
        options.update(
            pool_size=_POOL_SIZE, max_overflow=_POOL_OVERFLOW, isolation_level="AUTOCOMMIT"
        )
    if url.startswith("sqlite+aiosqlite"):
        options["module"] = OneHopDBAPI()
    try:
        return create_async_engine(url, **options)
    except ModuleNotFoundError as exc:
        # asyncpg (and redis) are the optional cluster extras.
        raise RuntimeError(
            f"the database driver for {url.split(':', 1)[0]!r} is not installed "
            f"({exc.name}); PostgreSQL needs `pip install 'tether[cluster]'`"
        ) from exc


def _sqlite_pragmas(dbapi_conn: object, _record: object) -> None:
    cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
