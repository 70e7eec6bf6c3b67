"""`tether mcp ...` against a real server and the real MCP fixture server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from core_support import wait_for
from mcp_support import FIXTURE

from tether.cli import main

pytestmark = pytest.mark.integration


def tether_mcp(app_server: Any, *args: str) -> Result:
    base = ["mcp", "--url", app_server.base_url, "--token", app_server.token]
    return CliRunner().invoke(main, [*base, *args], env={"TETHER_TOKEN": None})


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_add_list_rm(app_server: Any, tmp_path: Path) -> None:
    added = tether_mcp(
        app_server,
        "add",
        "clifx",
        "--name",
        "CLI fixture",
        "--command",
        sys.executable,
        "--arg",
        FIXTURE,
        "--arg",
        "stdio",
        "--arg",
        str(tmp_path),
        "--env",
        "FIXTURE_SECRET=never-shown",
        "--network",
        "full",
    )
    assert "added clifx" in ok(added)

    def listed() -> str | None:
        out = ok(tether_mcp(app_server, "list"))
        return out if "ready" in out else None

    table = wait_for(listed, what="the server to connect")
    assert "clifx" in table and "CLI fixture" in table and "stdio" in table
    raw = json.loads(ok(tether_mcp(app_server, "--json", "list")))
    assert raw[0]["env"] == {"FIXTURE_SECRET": "********"}
    assert raw[0]["sandbox"] is True and raw[0]["sandbox_network"] == "full"
    assert "never-shown" not in json.dumps(raw)
    assert "removed clifx" in ok(tether_mcp(app_server, "rm", "clifx"))
    assert "no MCP servers" in ok(tether_mcp(app_server, "list"))


def test_errors_are_readable(app_server: Any) -> None:
    both = tether_mcp(app_server, "add", "x", "--command", "a", "--url", "http://h/mcp")
    assert both.exit_code != 0 and "exactly one of --command and --url" in both.output
    bad_env = tether_mcp(app_server, "add", "x", "--command", "a", "--env", "NOVALUE")
    assert bad_env.exit_code != 0 and "NAME=VALUE" in bad_env.output
    missing = tether_mcp(app_server, "rm", "nope")
    assert missing.exit_code == 1 and "HTTP 404: MCP client 'nope' not found" in missing.output
    bad_key = tether_mcp(app_server, "add", "a__b", "--command", "a")
    assert bad_key.exit_code == 1 and "HTTP 422" in bad_key.output
    first = tether_mcp(app_server, "add", "twice", "--url", "http://127.0.0.1:9/mcp", "--disabled")
    ok(first)
    again = tether_mcp(app_server, "add", "twice", "--url", "http://127.0.0.1:9/mcp")
    assert again.exit_code == 1 and "HTTP 409" in again.output
    assert "To replace it, remove it first: tether mcp rm twice" in again.output
    ok(tether_mcp(app_server, "rm", "twice"))
