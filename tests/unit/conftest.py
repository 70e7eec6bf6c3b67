"""Fixtures the unit tests of several packages share."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tether.store.database import Database


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """A migrated store for one test (SQLite, or PostgreSQL on that run)."""
    database = Database(database_url)
    await database.migrate()
    try:
        yield database
    finally:
        await database.close()
