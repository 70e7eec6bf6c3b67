"""A real runner in a fresh home per test, stopped (with every call it ran) after."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from keeper_support import marked_processes

from tether.keeper import client
from tether.keeper.client import KeeperClient
from tether.sandbox import enforcers


@pytest.fixture
def runner_home(tmp_path: Path) -> Iterator[Path]:
    """A home with a live runner; afterwards the runner and all marked processes are
    gone (the runner outlives its clients by design, so the fixture must stop it)."""
    home = tmp_path / "home"
    identity = client.ensure_runner(home)
    yield home
    client.stop_runner(home)
    assert not identity.is_alive(), "the runner survived its fixture"
    # A runner killed by the test left its limits groups; cgroup directories outlive
    # the test's home.
    enforcers.choose(enforcers.runner_tag(home)).close()
    leftovers = marked_processes()
    for proc in leftovers:
        proc.kill()
    assert not leftovers, f"processes left running: {leftovers}"


@pytest.fixture
async def keeper(runner_home: Path) -> AsyncIterator[KeeperClient]:
    """A client of the test's runner, closed afterwards."""
    made = KeeperClient(runner_home)
    yield made
    made.close()
