"""Every decision is audited, refusals before review included (capacity, unknown tools,
unparsable arguments), and the JSON Lines export, by API and CLI, matches the table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from core_support import SHELL, Stack, gated, new_session, open_gate, stack_for_module, wait_for
from governance_support import audit, script

from tether.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    yield from stack_for_module("audit-export", TETHER_MAX_CALLS_PER_SESSION="1")


@pytest.fixture(scope="module")
def session(stack: Stack) -> str:
    """A session whose turn was refused in every way the agent refuses before review."""
    session = new_session()
    waiting = json.dumps({"command": gated("audit-gate")})
    # Arguments that are JSON but not an object: a reply with broken JSON never gets this
    # far (the turn refuses the whole reply), this does, and is refused as the call's.
    not_an_object = (SHELL, "[1, 2]")
    script(stack, (SHELL, waiting), (SHELL, waiting), ("no_such_tool", "{}"), not_an_object)
    task_id = stack.submit("go", session)
    wait_for(
        lambda: any(e["decided_by"] == "capacity" for e in audit(stack, session)),
        what="a capacity refusal",
    )
    open_gate(stack, "audit-gate")
    stack.wait_task(task_id)
    return session


def _export(stack: Stack, **params: Any) -> list[dict[str, Any]]:
    resp = stack.api("GET", "/api/governance/audit/export", params=params)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in resp.text.splitlines()]


@pytest.mark.p0
def test_refusals_before_review_are_audited(stack: Stack, session: str) -> None:
    by_cause = {e["decided_by"]: e for e in audit(stack, session)}
    assert {"policy", "capacity", "unknown-tool", "invalid-arguments"} <= set(by_cause)
    assert by_cause["unknown-tool"]["tool_name"] == "no_such_tool"
    assert "no tool named 'no_such_tool'" in by_cause["unknown-tool"]["reason"]
    assert by_cause["invalid-arguments"]["arguments"] == {"unparsed": "[1, 2]"}
    assert "must be a JSON object" in by_cause["invalid-arguments"]["reason"]
    assert "too many tool calls" in by_cause["capacity"]["reason"]
    for cause in ("capacity", "unknown-tool", "invalid-arguments"):
        assert by_cause[cause]["outcome"] == "denied"


def test_the_export_matches_the_audit_table(stack: Stack, session: str) -> None:
    table = list(reversed(audit(stack, session)))  # the list is newest first
    assert _export(stack, session_id=session) == table
    everything = _export(stack)
    assert [e["id"] for e in everything] == sorted(e["id"] for e in everything)
    assert all(e in everything for e in table)


def test_the_export_filters(stack: Stack, session: str) -> None:
    table = list(reversed(audit(stack, session)))
    denied = _export(stack, session_id=session, decision="denied")
    assert denied == [e for e in table if e["outcome"] == "denied"]
    assert _export(stack, session_id=session, decision="allowed") == [
        e for e in table if e["outcome"] == "allowed"
    ]
    middle = table[1]["created_at"]
    assert _export(stack, session_id=session, since=middle) == [
        e for e in table if e["created_at"] >= middle
    ]
    assert _export(stack, session_id=session, until=str(middle)) == [
        e for e in table if e["created_at"] < middle
    ]
    # ISO 8601 times (microseconds apart would be at the mercy of float rounding: a second
    # after the last decision is not).
    after = datetime.fromtimestamp(table[-1]["created_at"] + 1, UTC)
    assert _export(stack, session_id=session, until=after.isoformat()) == table
    zulu = after.isoformat().replace("+00:00", "Z")
    assert _export(stack, session_id=session, since=zulu) == []
    assert _export(stack, session_id="console:nobody") == []


@pytest.mark.parametrize(
    "params",
    [
        {"since": "yesterday"},
        {"until": "2026-01-01T00:00:00"},  # no zone: ambiguous
        {"decision": "maybe"},
        # float() takes these, and the export answered nothing with a 200.
        {"since": "NaN"},
        {"until": "inf"},
        {"since": "1e400"},
    ],
)
def test_bad_filters_are_422(stack: Stack, params: dict[str, str]) -> None:
    resp = stack.api("GET", "/api/governance/audit/export", params=params)
    assert resp.status_code == 422, resp.text


def _cli(stack: Stack, *args: str) -> str:
    base = ["audit", "export", "--url", stack.server.base_url, "--token", stack.server.token]
    result = CliRunner().invoke(main, [*base, *args], env={"TETHER_TOKEN": None})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_the_cli_writes_the_same_lines(stack: Stack, session: str, tmp_path: Path) -> None:
    expected = _export(stack, session_id=session, decision="denied")
    target = tmp_path / "audit.jsonl"
    _cli(stack, "--session-id", session, "--decision", "denied", "-o", str(target))
    lines = target.read_text().splitlines()
    assert [json.loads(line) for line in lines] == expected
    stdout = _cli(stack, "--session-id", session)
    assert [json.loads(line) for line in stdout.splitlines()] == _export(stack, session_id=session)


def test_the_cli_fails_readably_and_leaves_no_partial_file(stack: Stack, tmp_path: Path) -> None:
    target = tmp_path / "audit.jsonl"
    base = ["audit", "export", "--url", stack.server.base_url, "--token", "wrong"]
    result = CliRunner().invoke(main, [*base, "-o", str(target)], env={"TETHER_TOKEN": None})
    assert result.exit_code == 1
    assert "HTTP 401" in result.output
    assert not target.exists()
