"""Two server processes over one database (SQLite, or PostgreSQL when the run is on it):
each due tick fires exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from core_support import start_server
from cron_support import create_job, history, once_at, text_job, wait_runs_finished

from database_support import shared_database_url

pytestmark = pytest.mark.integration

JOBS = 6


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    url = shared_database_url(tmp_path)
    first = start_server(tmp_path / "a", TETHER_DATABASE_URL=url)
    second = None
    try:
        # The jobs exist before the second process starts, so both plan the same ticks
        # from the start and both wake for them: a real race for every claim.
        for index in range(JOBS):
            create_job(first, text_job(f"shared-{index}", "tick", schedule=once_at(4)))
        second = start_server(tmp_path / "b", TETHER_DATABASE_URL=url)
        yield first, second
    finally:
        first.close()
        if second is not None:
            second.close()


def test_each_tick_fires_once_across_processes(two_servers: tuple[Any, Any]) -> None:
    first, second = two_servers
    for index in range(JOBS):
        job_id = f"shared-{index}"
        (run,) = wait_runs_finished(first, job_id, timeout=20)
        assert (run["trigger"], run["status"]) == ("scheduled", "success")
        messages = second.api_request("GET", f"/api/chats/cron:{job_id}/messages").json()
        assert [m["message"]["content"] for m in messages] == ["tick"]
    # Both processes have long since woken for these ticks; nothing fired twice.
    for index in range(JOBS):
        assert len(history(second, f"shared-{index}")) == 1
