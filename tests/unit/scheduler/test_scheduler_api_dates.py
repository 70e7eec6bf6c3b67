"""The cron API's next run on fixed dates around DST changes, with the server's clock
set by the test (not whatever today is), against instants worked out by hand.

A time that does not exist on a spring-forward day runs at the first instant after the
gap; an ambiguous one on a fall-back day runs at its first occurrence
(src/tether/scheduler/timing.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tether.app import create_app
from tether.config import Settings

# (zone, the clock, the next 02:30 local as an instant in UTC, worked out by hand)
CASES = [
    # Europe/Berlin springs forward on 2027-03-28 at 02:00 CET -> 03:00 CEST: 02:30 does
    # not exist, so 03:00 CEST = 01:00 UTC.
    ("Europe/Berlin", "2027-03-27T12:00:00+00:00", "2027-03-28T01:00:00+00:00"),
    # The day before the change: an ordinary 02:30 CET = 01:30 UTC.
    ("Europe/Berlin", "2027-03-26T12:00:00+00:00", "2027-03-27T01:30:00+00:00"),
    # Europe/Berlin falls back on 2027-10-31 at 03:00 CEST -> 02:00 CET: 02:30 happens
    # twice, the first time in CEST = 00:30 UTC.
    ("Europe/Berlin", "2027-10-30T12:00:00+00:00", "2027-10-31T00:30:00+00:00"),
    # America/New_York springs forward on 2027-03-14 at 02:00 EST: 03:00 EDT = 07:00 UTC.
    ("America/New_York", "2027-03-13T12:00:00+00:00", "2027-03-14T07:00:00+00:00"),
    # Australia/Sydney springs forward on 2027-10-03 at 02:00 AEST: 03:00 AEDT (+11) is
    # 16:00 UTC the day before.
    ("Australia/Sydney", "2027-10-02T00:00:00+00:00", "2027-10-02T16:00:00+00:00"),
]


@pytest.fixture
def client_at(tmp_path: Path) -> Iterator[Any]:
    clients: list[TestClient] = []

    def open_at(now: datetime) -> TestClient:
        # No keeper: its runner would outlive the app, and no call runs here.
        settings = Settings(home=tmp_path / f"home-{len(clients)}", no_auth=True, keeper=False)
        client = TestClient(create_app(settings, clock=lambda: now), base_url="http://127.0.0.1")
        client.__enter__()  # runs the lifespan: services built with the fixed clock
        clients.append(client)
        return client

    try:
        yield open_at
    finally:
        for client in clients:
            client.__exit__(None, None, None)


@pytest.mark.parametrize(("zone", "now", "expected"), CASES)
def test_next_run_on_fixed_dates(client_at: Any, zone: str, now: str, expected: str) -> None:
    client = client_at(datetime.fromisoformat(now))
    body = {
        "id": "daily",
        "name": "daily at 02:30",
        "schedule": {"type": "cron", "cron": "30 2 * * *", "timezone": zone},
        "task_type": "text",
        "text": "tick",
    }
    assert client.post("/api/cron/jobs", json=body).status_code == 200
    raw = client.get("/api/cron/jobs/daily/state").json()["next_run_at"]
    assert datetime.fromisoformat(raw).astimezone(UTC) == datetime.fromisoformat(expected)
