"""External (MCP) tools: severity from their declared hints, and user rules that name tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.governance.analyzer import Analyzer
from tether.governance.context import AnalysisContext
from tether.governance.findings import Severity
from tether.governance.rules import parse_rules

CTX = AnalysisContext(Path("/work/ws"), Path("/home/u"), Path("/home/u/.tether"))
HINTS = {
    "gh__delete_repo": {"destructiveHint": True, "readOnlyHint": False},
    "gh__search": {"readOnlyHint": True},
    "web__fetch": {"openWorldHint": True},
    "odd__thing": {},
    "both__ways": {"readOnlyHint": True, "destructiveHint": True},
}


def _analyzer(rules: list[dict[str, object]] | None = None) -> Analyzer:
    return Analyzer(parse_rules(rules or []), annotations_of=HINTS.get)


@pytest.mark.parametrize(
    ("tool", "severity", "rule_id"),
    [
        ("gh__delete_repo", Severity.HIGH, "mcp.destructive"),
        ("gh__search", Severity.LOW, "mcp.read-only"),
        ("web__fetch", Severity.MEDIUM, "mcp.open-world"),
        ("odd__thing", Severity.MEDIUM, "mcp.unannotated"),
        # A server claiming both is taken at its most dangerous word.
        ("both__ways", Severity.HIGH, "mcp.destructive"),
    ],
)
def test_hints_set_the_severity(tool: str, severity: Severity, rule_id: str) -> None:
    (finding,) = _analyzer().analyze_tool_call(tool, {}, CTX)
    assert (finding.severity, finding.rule_id) == (severity, rule_id)


def test_a_tool_that_is_not_external_gets_no_hint_finding() -> None:
    assert _analyzer().analyze_tool_call("get_current_time", {}, CTX) == []


def test_user_rules_of_kind_tool_name_tools_by_pattern() -> None:
    rules = [
        {
            "id": "no-gh-writes",
            "kind": "tool",
            "severity": "CRITICAL",
            "description": "no writes to GitHub",
            "tool": ["gh__delete_*", "gh__create_*"],
        },
    ]
    found = _analyzer(rules).analyze_tool_call("gh__delete_repo", {}, CTX)
    assert [f.rule_id for f in found] == ["no-gh-writes", "mcp.destructive"]
    assert _analyzer(rules).analyze_tool_call("gh__search", {}, CTX)[0].rule_id == "mcp.read-only"


def test_a_tool_rule_must_name_a_tool_and_nothing_else() -> None:
    with pytest.raises(ValueError, match="tool rule needs"):
        parse_rules([{"id": "x", "kind": "tool", "severity": "HIGH", "description": "d"}])
    with pytest.raises(ValueError, match="cannot use command"):
        parse_rules(
            [
                {
                    "id": "x",
                    "kind": "tool",
                    "severity": "HIGH",
                    "description": "d",
                    "tool": ["a"],
                    "command": ["rm"],
                }
            ]
        )
