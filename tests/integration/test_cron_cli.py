"""`tether cron ...` against a real server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner, Result
from cron_support import wait_runs_finished

from tether.cli import main

pytestmark = pytest.mark.integration


def tether_cron(app_server: Any, *args: str, **env: str | None) -> Result:
    runner = CliRunner()
    base = ["cron", "--url", app_server.base_url]
    if "TETHER_HOME" not in env:
        base += ["--token", app_server.token]
    return runner.invoke(main, [*base, *args], env={"TETHER_TOKEN": None, **env})


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_add_list_run_pause_resume_rm(app_server: Any) -> None:
    out = ok(
        tether_cron(
            app_server,
            "add",
            "--id",
            "cli-job",
            "--name",
            "CLI job",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Paris",
            "--text",
            "good morning",
        )
    )
    assert "created cli-job" in out

    table = ok(tether_cron(app_server, "list"))
    header, *rows = table.splitlines()
    assert header.split()[:3] == ["ID", "NAME", "ENABLED"]
    (row,) = [r for r in rows if r.startswith("cli-job")]
    assert "0 9 * * 1-5 (Europe/Paris)" in row and " yes " in row

    run_id = ok(tether_cron(app_server, "run", "cli-job")).strip()
    (run,) = wait_runs_finished(app_server, "cli-job")
    assert (run["run_id"], run["status"]) == (run_id, "success")

    ok(tether_cron(app_server, "pause", "cli-job"))
    listed = json.loads(ok(tether_cron(app_server, "--json", "list")))
    (job,) = [j for j in listed if j["id"] == "cli-job"]
    assert job["enabled"] is False and job["state"]["next_run_at"] is None
    assert job["state"]["last_status"] == "success"

    ok(tether_cron(app_server, "resume", "cli-job"))
    resumed = app_server.api_request("GET", "/api/cron/jobs/cli-job/state").json()
    assert resumed["next_run_at"] is not None

    assert "deleted cli-job" in ok(tether_cron(app_server, "rm", "cli-job"))
    assert app_server.api_request("GET", "/api/cron/jobs/cli-job").status_code == 404


def test_add_once_with_a_prompt_and_options(app_server: Any) -> None:
    local = (datetime.now(UTC) + timedelta(days=1)).astimezone(ZoneInfo("Asia/Tokyo"))
    naive = local.replace(tzinfo=None, microsecond=0).isoformat()
    job = json.loads(
        ok(
            tether_cron(
                app_server,
                "--json",
                "add",
                "--name",
                "tomorrow",
                "--at",
                naive,
                "--tz",
                "Asia/Tokyo",
                "--prompt",
                "summarise",
                "--approval-level",
                "strict",
                "--timeout",
                "45",
                "--grace",
                "10",
                "--paused",
            )
        )
    )
    assert job["schedule"]["type"] == "once"
    assert datetime.fromisoformat(job["schedule"]["run_at"]) == local.replace(microsecond=0)
    assert job["task_type"] == "agent"
    assert job["request"]["input"] == [
        {"role": "user", "content": [{"type": "text", "text": "summarise"}]}
    ]
    runtime = job["runtime"]
    assert (
        job["approval_level"],
        runtime["timeout_seconds"],
        runtime["misfire_grace_seconds"],
    ) == (
        "strict",
        45,
        10,
    )
    assert job["enabled"] is False


def test_errors_are_readable_and_exit_nonzero(app_server: Any) -> None:
    both = tether_cron(
        app_server, "add", "--name", "x", "--cron", "* * * * *", "--at", "2030-01-01"
    )
    assert both.exit_code == 2 and "exactly one of --cron and --at" in both.output
    # An --at with its own offset would have silently ignored --tz.
    before = app_server.api_request("GET", "/api/cron/jobs").json()
    offset = ["add", "--name", "x", "--at", "2030-06-01T09:00+02:00", "--tz", "UTC"]
    both_zones = tether_cron(app_server, *offset, "--text", "t")
    assert both_zones.exit_code == 2 and "would not apply" in both_zones.output
    assert app_server.api_request("GET", "/api/cron/jobs").json() == before

    bad = tether_cron(app_server, "add", "--name", "x", "--cron", "99 * * * *", "--text", "t")
    assert bad.exit_code == 1
    assert "HTTP 422" in bad.output and "schedule.cron.cron" in bad.output

    missing = tether_cron(app_server, "run", "no-such-job")
    assert missing.exit_code == 1 and "HTTP 404" in missing.output

    unreachable = CliRunner().invoke(main, ["cron", "--url", "http://127.0.0.1:9", "list"])
    assert unreachable.exit_code == 1 and "cannot reach Tether" in unreachable.output


def test_token_is_read_from_tether_home(app_server: Any, tmp_path: Path) -> None:
    (tmp_path / "token").write_text(app_server.token + "\n")
    assert ok(tether_cron(app_server, "list", TETHER_HOME=str(tmp_path)))

    (tmp_path / "token").write_text("wrong-token")
    denied = tether_cron(app_server, "list", TETHER_HOME=str(tmp_path))
    assert denied.exit_code == 1 and "HTTP 401" in denied.output


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_without_url_it_reaches_the_server_tether_host_and_port_name(
    app_server: Any, host: str
) -> None:
    """It went to :8088 whatever TETHER_PORT said (TETHER_URL was its only way)."""
    result = CliRunner().invoke(
        main,
        ["cron", "--token", app_server.token, "list"],
        env={"TETHER_URL": None, "TETHER_HOST": host, "TETHER_PORT": str(app_server.port)},
    )
    assert result.exit_code == 0, (result.output, result.exception)
