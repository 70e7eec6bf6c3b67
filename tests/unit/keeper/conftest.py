"""A real runner in a fresh home per test, stopped (with every call it ran) after."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from keeper_support import live_runner

from tether.keeper.client import KeeperClient


@pytest.fixture
def runner_home(tmp_path: Path) -> Iterator[Path]:
    """A home with a live runner; afterwards the runner and all marked processes are
    gone (the runner outlives its clients by design, so the fixture must stop it)."""
    with live_runner(tmp_path / "home") as home:
        yield home


@pytest.fixture
async def keeper(runner_home: Path) -> AsyncIterator[KeeperClient]:
    """A client of the test's runner, closed afterwards."""
    made = KeeperClient(runner_home)
    yield made
    made.close()
