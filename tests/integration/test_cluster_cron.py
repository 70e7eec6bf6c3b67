"""Cron on three nodes: every due time fires exactly once across the cluster.

Three real nodes on one PostgreSQL database and one Redis; each node's scheduler wakes
for the same ticks, and the store's conditional claims let one of them run each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import Cluster, three_nodes
from core_support import wait_for
from cron_support import create_job, history, once_at, text_job, wait_runs_finished

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from three_nodes(tmp_path)


def test_a_batch_due_at_one_moment_fires_once_each(cluster: Cluster) -> None:
    jobs = [f"batch-{i}" for i in range(12)]
    at = once_at(6)
    for index, job_id in enumerate(jobs):
        create_job(cluster.nodes[index % 3], text_job(job_id, f"tick {job_id}", schedule=at))
    for job_id in jobs:
        (run,) = wait_runs_finished(cluster.nodes[0], job_id, timeout=30)
        assert (run["trigger"], run["status"]) == ("scheduled", "success"), run
    # Every node has long since woken for that moment; nothing fired twice, and each
    # job's text reached its chat once.
    for job_id in jobs:
        for node in (1, 2):
            assert len(history(cluster.nodes[node], job_id)) == 1
        said = cluster.api(2, "GET", f"/api/chats/cron:{job_id}/messages").json()
        assert [m["message"]["content"] for m in said] == [f"tick {job_id}"]
    (total,) = cluster.rows("SELECT count(*) AS n FROM cron_runs")
    assert total["n"] == len(jobs)


@pytest.mark.timeout(420)
def test_a_per_minute_job_fires_once_a_minute_over_three_minutes(cluster: Cluster) -> None:
    job = text_job("every-minute", "minute", schedule={"type": "cron", "cron": "* * * * *"})
    create_job(cluster.nodes[1], job)

    def three_runs() -> list[dict[str, object]] | None:
        runs = [r for r in history(cluster.nodes[2], "every-minute") if r["status"] != "running"]
        return runs if len(runs) >= 3 else None

    runs = wait_for(three_runs, timeout=240, what="three minutes of runs")
    times = [r["scheduled_for"] for r in runs]
    assert len(times) == len(set(times)), runs  # no due time ran twice
    assert all(r["status"] == "success" for r in runs), runs
    rows = cluster.rows(
        "SELECT scheduled_for, count(*) AS n FROM cron_runs "
        "WHERE job_id = 'every-minute' GROUP BY scheduled_for"
    )
    assert all(r["n"] == 1 for r in rows), rows
