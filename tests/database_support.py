"""The database the tests run on: SQLite (default) or PostgreSQL.

``TETHER_TEST_DATABASE=postgresql`` runs the same tests on PostgreSQL
(``TETHER_TEST_POSTGRES``, default ``postgres@127.0.0.1:5432``, trust auth): every
store a test opens gets a database of its own, created here and dropped when the
session ends. On CI (``CI=true``) a PostgreSQL that cannot be reached fails the test;
elsewhere, tests that need it are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_SERVER = os.environ.get("TETHER_TEST_POSTGRES", "postgres@127.0.0.1:5432")
_created: set[str] = set()


def on_postgresql() -> bool:
    """Whether this run puts every store on PostgreSQL."""
    backend = os.environ.get("TETHER_TEST_DATABASE", "sqlite")
    if backend not in ("sqlite", "postgresql"):
        raise ValueError(f"TETHER_TEST_DATABASE={backend!r}: use sqlite or postgresql")
    return backend == "postgresql"


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


async def _connect(database: str) -> Any:
    import asyncpg

    user, address = _SERVER.split("@", 1)
    host, port = address.rsplit(":", 1)
    return await asyncpg.connect(host=host, port=int(port), user=user, database=database, timeout=5)


async def _query(statement: str, database: str) -> list[Any]:
    conn = await _connect(database)
    try:
        return list(await conn.fetch(statement))
    finally:
        await conn.close()


@contextmanager
def held_transaction(key: str, statement: str) -> Iterator[None]:
    """Run ``statement`` in a transaction of the test's own on the database of ``key``,
    and hold it open, with the locks it took, until the block ends (then roll it back):
    a node that writes what it locked waits until then."""
    taken, done = threading.Event(), threading.Event()

    async def hold() -> None:
        conn = await _connect(_database_name(key))
        try:
            async with conn.transaction():
                await conn.execute(statement)
                taken.set()
                await asyncio.to_thread(done.wait)
                raise _RolledBack
        except _RolledBack:
            pass
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        holding = pool.submit(asyncio.run, hold())
        try:
            while not taken.wait(0.05):
                if holding.done():
                    holding.result()  # raises what went wrong
            yield
        finally:
            done.set()
        holding.result()


class _RolledBack(Exception):
    """Leaves a held transaction without committing it."""


def _run_admin(statement: str, database: str = "postgres") -> list[Any]:
    # Tests may call this from inside a running event loop (async fixtures), so the
    # statement gets a loop of its own in a thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _query(statement, database)).result()


def _database_name(key: str) -> str:
    return "tether_test_" + hashlib.sha256(key.encode()).hexdigest()[:20]


def postgres_url(key: str) -> str:
    """The URL of a PostgreSQL database named after ``key`` (created if missing)."""
    name = _database_name(key)
    if name not in _created:
        try:
            _run_admin(f'CREATE DATABASE "{name}"')
        except Exception as exc:
            if type(exc).__name__ != "DuplicateDatabaseError":
                raise RuntimeError(f"cannot create a test database on {_SERVER}: {exc}") from exc
        _created.add(name)
    return f"postgresql+asyncpg://{_SERVER}/{name}"


def database_url_for(key: str, sqlite_path: str) -> str:
    """The store URL for one test store: SQLite at ``sqlite_path``, or PostgreSQL."""
    return postgres_url(key) if on_postgresql() else f"sqlite+aiosqlite:///{sqlite_path}"


def stored_rows(home: Path, table: str) -> str:
    """Every row of ``table`` in the store of the server whose home is ``home``, as text
    (for tests that check what is at rest)."""
    if not on_postgresql():
        with sqlite3.connect(home / "tether.db") as conn:
            rows = conn.execute(f"SELECT * FROM {table}").fetchall()
        conn.close()
        return str(rows)
    records = _run_admin(f"SELECT * FROM {table}", _database_name(str(home.resolve())))
    return str([tuple(r.values()) for r in records])


def change_stored(home: Path, statement: str) -> None:
    """Run one SQL statement on the store of the server whose home is ``home`` (for
    tests that stand in for another node writing to a shared store)."""
    if not on_postgresql():
        with sqlite3.connect(home / "tether.db") as conn:
            conn.execute(statement)
        conn.close()
        return
    _run_admin(statement, _database_name(str(home.resolve())))


def shared_database_url(tmp_path: Any) -> str:
    """One store several server processes of a test open together."""
    return database_url_for(f"shared:{tmp_path}", str(tmp_path / "shared.db"))


def reachable() -> str | None:
    """None if PostgreSQL answers, else why not."""
    try:
        _run_admin("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {_SERVER} is needed: {exc}"
    return None


def require_postgresql() -> None:
    """Skip (fail on CI) when no PostgreSQL answers."""
    problem = reachable()
    if problem and on_ci():
        pytest.fail(problem)
    if problem:
        pytest.skip(problem)


async def _drop_all(names: list[str]) -> None:
    # DROP DATABASE waits for a checkpoint; drops sent together share one, where one at
    # a time took a checkpoint each (a minute apiece on a busy machine).
    gate = asyncio.Semaphore(16)

    async def drop(name: str) -> None:
        async with gate:
            await _query(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', "postgres")

    await asyncio.gather(*(drop(name) for name in names))


def drop_created() -> None:
    """Drop every database this session created."""
    if _created:
        asyncio.run(_drop_all(sorted(_created)))
    _created.clear()
