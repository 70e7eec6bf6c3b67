"""Cron on three nodes: every due time fires exactly once across the cluster.

Three real nodes on one PostgreSQL database and one Redis; each node's scheduler wakes
for the same ticks, and the store's conditional claims let one of them run each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import Cluster, three_nodes
from core_support import process_gone, shell_call, wait_for
from cron_support import agent_job, create_job, history, once_at, text_job, wait_runs_finished

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


def test_deleting_a_job_on_one_node_stops_its_run_on_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    pid_file = tmp_path / "turn.pid"
    cluster.model.script(shell_call(f"echo $$ > {pid_file}; exec sleep 300"), {"text": "done"})
    create_job(cluster.nodes[0], agent_job("long", timeout_seconds=600))
    started = cluster.api(0, "POST", "/api/cron/jobs/long/run")
    assert started.status_code == 200, started.text
    pid = wait_for(
        lambda: pid_file.exists() and pid_file.read_text().strip(), what="the turn's command"
    )
    deleted = cluster.api(1, "DELETE", "/api/cron/jobs/long")
    assert deleted.status_code == 200, deleted.text
    # The run's turn on node 0 was stopped, with its command.
    wait_for(lambda: process_gone(int(pid)), what="the command to be stopped")
    (task,) = cluster.rows("SELECT status FROM tasks WHERE trigger = 'cron'")
    assert task["status"] == "finished"
    assert cluster.api(0, "GET", "/api/cron/jobs/long").status_code == 404
