"""The webhook tests' store: the real repository, watched, on SQLite or (on that run)
PostgreSQL."""

from __future__ import annotations

import pytest
from webhook_doubles import WatchedRepository

from tether.store.database import Database


@pytest.fixture
def repo(db: Database) -> WatchedRepository:
    return WatchedRepository(db)
