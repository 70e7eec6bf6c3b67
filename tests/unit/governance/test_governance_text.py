"""Text rules: bidi controls, invisible and look-alike characters in any tool call."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tether.governance.analyzer import Analyzer
from tether.governance.context import AnalysisContext
from tether.governance.findings import Severity
from tether.governance.levels import decide
from tether.governance.rules import parse_rules

SHELL = "execute_shell_command"


def _findings(ctx: AnalysisContext, tool: str, **arguments: Any) -> dict[str, str]:
    found = Analyzer().analyze_tool_call(tool, arguments, ctx)
    return {f.rule_id: f.description for f in found if f.severity >= Severity.HIGH}


@pytest.mark.parametrize(
    ("command", "rule", "named"),
    [
        # Displays as one harmless echo; bash runs the rm.
        ('echo "ok\u2067"; rm ./notes.txt; #\u2069', "text-bidi-control", "U+2067"),
        ("echo safe\u202e; rm -r x", "text-bidi-control", "RIGHT-TO-LEFT OVERRIDE"),
        ("echo a\u200bb", "text-invisible", "ZERO WIDTH SPACE"),
        ("echo a\u2060b", "text-invisible", "U+2060"),
        ("echo \U000e0041", "text-invisible", "U+E0041"),
        ("echo hi\x1b[2K", "text-invisible", "U+001B"),
        ("curl https://g\u0456thub.com/x", "text-confusable", "CYRILLIC"),
        ("ls\u00a0-la", "text-confusable", "NO-BREAK SPACE"),
        ("\uff52\uff4d -r x", "text-confusable", "FULLWIDTH"),
    ],
)
def test_hiding_characters_in_a_command_are_high_findings(
    ctx: AnalysisContext, command: str, rule: str, named: str
) -> None:
    found = _findings(ctx, SHELL, command=command)
    assert rule in found, found
    assert named in found[rule]
    # The finding describes them without containing them.
    assert found[rule].isascii()
    findings = Analyzer().analyze_tool_call(SHELL, {"command": command}, ctx)
    assert decide("auto", findings) == "ask"


@pytest.mark.parametrize(
    "command",
    ["echo plain", "echo привет мир", "echo γειά", "echo ❤️ 👍", "printf 'a\\tb\\n'", "echo é"],
)
def test_ordinary_text_has_no_text_findings(ctx: AnalysisContext, command: str) -> None:
    assert not [k for k in _findings(ctx, SHELL, command=command) if k.startswith("text-")]


def test_every_tool_and_nested_argument_is_read(ctx: AnalysisContext) -> None:
    assert "text-bidi-control" in _findings(ctx, "write_file", path="a.py", content="x\u202ey")
    assert "text-invisible" in _findings(ctx, "some_tool", items=[{"q": "a\u200db"}])
    # Look-alikes count only where they change what runs or where it goes.
    assert "text-confusable" not in _findings(ctx, "write_file", path="a.txt", content="ab\u0430")
    assert "text-confusable" in _findings(ctx, "write_file", path="\u0430b.txt", content="")


def test_a_text_rule_is_data_like_the_others(ctx: AnalysisContext) -> None:
    [rule] = parse_rules(
        [
            {
                "id": "no-emoji-in-commands",
                "severity": "MEDIUM",
                "description": "Emoji",
                "kind": "text",
                "text_regex": "[\U0001f300-\U0001faff]",
                "in_arguments": ["command"],
            }
        ]
    )
    assert rule.kind == "text"
    analyzer = Analyzer([rule])
    found = analyzer.analyze_tool_call(SHELL, {"command": "echo 😀"}, ctx)
    assert [f.rule_id for f in found] == ["no-emoji-in-commands"]


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "text"},
        {"kind": "text", "text_regex": "("},
        {"kind": "text", "text_regex": "x", "command": ["ls"]},
        {"kind": "shell", "command": ["ls"], "in_arguments": ["command"]},
    ],
)
def test_malformed_text_rules_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_rules([{"id": "r", "severity": "HIGH", "description": "d", **bad}])
