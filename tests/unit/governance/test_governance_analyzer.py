"""Tool-call dispatch in the Analyzer."""

from __future__ import annotations

import pytest

from tether.governance.analyzer import Analyzer
from tether.governance.context import AnalysisContext
from tether.governance.findings import Severity, worst
from tether.governance.levels import decide


@pytest.fixture(scope="module")
def analyzer() -> Analyzer:
    return Analyzer()


def test_shell_tool(analyzer: Analyzer, ctx: AnalysisContext) -> None:
    findings = analyzer.analyze_tool_call("execute_shell_command", {"command": "rm -rf /"}, ctx)
    assert decide("off", findings) == "deny"
    assert analyzer.analyze_tool_call("execute_shell_command", {"command": "ls"}, ctx) == []


def test_shell_cwd_is_used_for_relative_paths(analyzer: Analyzer, ctx: AnalysisContext) -> None:
    args = {"command": "rm -rf *", "cwd": "/"}
    findings = analyzer.analyze_tool_call("execute_shell_command", args, ctx)
    assert worst(findings) is Severity.CRITICAL
    inside = {"command": "rm -rf *", "cwd": "build"}
    assert analyzer.analyze_tool_call("execute_shell_command", inside, ctx) == []


def test_shell_cwd_outside_workspace_is_medium(analyzer: Analyzer, ctx: AnalysisContext) -> None:
    args = {"command": "ls", "cwd": "/tmp"}
    [finding] = analyzer.analyze_tool_call("execute_shell_command", args, ctx)
    assert finding.severity is Severity.MEDIUM


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("execute_shell_command", {}),
        ("execute_shell_command", {"command": ["rm", "-rf", "/"]}),
        ("execute_shell_command", {"command": "ls", "cwd": 3}),
        ("read_file", {}),
        ("write_file", {"path": None}),
    ],
)
def test_malformed_arguments_are_high(
    analyzer: Analyzer, ctx: AnalysisContext, tool: str, arguments: dict[str, object]
) -> None:
    findings = analyzer.analyze_tool_call(tool, arguments, ctx)
    assert worst(findings) is Severity.HIGH


def test_file_tools(analyzer: Analyzer, ctx: AnalysisContext) -> None:
    read = analyzer.analyze_tool_call("read_file", {"path": "~/.tether/token"}, ctx)
    assert worst(read) is Severity.CRITICAL
    write = analyzer.analyze_tool_call("write_file", {"path": "/etc/passwd"}, ctx)
    assert worst(write) is Severity.HIGH
    edit = analyzer.analyze_tool_call("edit_file", {"path": "src/app.py"}, ctx)
    assert edit == []


@pytest.mark.parametrize("tool", ["get_current_time", "some_future_tool"])
def test_other_tools_have_no_findings(analyzer: Analyzer, ctx: AnalysisContext, tool: str) -> None:
    findings = analyzer.analyze_tool_call(tool, {"anything": 1}, ctx)
    assert findings == []
    assert decide("strict", findings) == "ask"
    assert decide("auto", findings) == "allow"


def test_rule_snapshot_properties() -> None:
    analyzer = Analyzer()
    assert analyzer.user_rules == ()
    assert len(analyzer.rules) > 40
