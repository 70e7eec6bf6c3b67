"""Fixtures the unit tests of several packages share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tether.store.database import Database
from tether.store.owners import OwnerLock
from tether.store.store import Store


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """A migrated store for one test (SQLite, or PostgreSQL on that run)."""
    database = Database(database_url)
    await database.migrate()
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
def servers(db: Database, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Makes the store of one more server on ``db``, with an owner id of its own."""
    claimed: list[OwnerLock] = []

    def server() -> Store:
        claimed.append(OwnerLock.claim(tmp_path / "owners"))
        return Store(db, claimed[-1])

    yield server
    for owner in claimed:
        owner.release()
