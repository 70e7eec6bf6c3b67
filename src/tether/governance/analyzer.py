"""Entry point for the agent: analyse one tool call with built-in and user rules."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence

from tether.governance.context import AnalysisContext
from tether.governance.file_analysis import FileOp, analyze_file_access
from tether.governance.findings import Finding, Severity
from tether.governance.paths import within
from tether.governance.rules import Rule, load_builtin_rules
from tether.governance.shell_analysis import analyze_shell, dedupe
from tether.governance.text_analysis import analyze_text
from tether.governance.tool_analysis import annotation_finding, tool_rule_findings

# What an external tool declares about itself (MCP annotations), or None for a tool that
# is not external.
AnnotationsOf = Callable[[str], Mapping[str, object] | None]

SHELL_TOOL = "execute_shell_command"
FILE_TOOLS: dict[str, FileOp] = {"read_file": "read", "write_file": "write", "edit_file": "edit"}

INVALID_ARGUMENTS = "tool.invalid-arguments"
CWD_OUTSIDE_WORKSPACE = "shell.cwd-outside-workspace"


class Analyzer:
    """Holds the active rule set and analyses tool calls against it.

    User rules can be replaced at run time with :meth:`set_user_rules`. The
    combined rule tuple is swapped in a single assignment, so a concurrent
    analysis sees either the old or the new set, never a mix.
    """

    def __init__(
        self, user_rules: Sequence[Rule] = (), annotations_of: AnnotationsOf | None = None
    ) -> None:
        self._builtin = tuple(load_builtin_rules())
        self._rules: tuple[Rule, ...] = self._builtin + tuple(user_rules)
        self._annotations_of = annotations_of or (lambda _name: None)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Built-in rules followed by user rules."""
        return self._rules

    @property
    def user_rules(self) -> tuple[Rule, ...]:
        """The user rules currently in force."""
        return self._rules[len(self._builtin) :]

    def set_user_rules(self, rules: Sequence[Rule]) -> None:
        """Replace the user rules (validate them first with ``parse_rules``)."""
        self._rules = self._builtin + tuple(rules)

    def analyze_tool_call(
        self, tool_name: str, arguments: Mapping[str, object], ctx: AnalysisContext
    ) -> list[Finding]:
        """Findings for one tool call: its tool's analysis (unknown tools have none; the
        level decides) and the text rules, which read every tool's arguments."""
        rules = self._rules  # one snapshot for the whole analysis
        findings = tool_rule_findings(tool_name, rules)
        if tool_name == SHELL_TOOL:
            findings += _shell_call(arguments, ctx, rules)
        elif tool_name in FILE_TOOLS:
            findings += _file_call(tool_name, arguments, ctx, rules)
        elif (annotations := self._annotations_of(tool_name)) is not None:
            findings.append(annotation_finding(tool_name, annotations))
        return dedupe([*findings, *analyze_text(arguments, rules)])


def _file_call(
    tool_name: str, arguments: Mapping[str, object], ctx: AnalysisContext, rules: Sequence[Rule]
) -> list[Finding]:
    path = arguments.get("path")
    if not isinstance(path, str):
        return [_invalid(tool_name, "path")]
    return analyze_file_access(FILE_TOOLS[tool_name], path, ctx, rules)


def _shell_call(
    arguments: Mapping[str, object], ctx: AnalysisContext, rules: Sequence[Rule]
) -> list[Finding]:
    command = arguments.get("command")
    if not isinstance(command, str):
        return [_invalid(SHELL_TOOL, "command")]
    raw_cwd = arguments.get("cwd")
    if raw_cwd is not None and not isinstance(raw_cwd, str):
        return [_invalid(SHELL_TOOL, "cwd")]
    cwd = None
    extra: list[Finding] = []
    if raw_cwd:
        cwd = posixpath.normpath(posixpath.join(str(ctx.workspace), raw_cwd))
        if not within(cwd, str(ctx.workspace)):
            extra.append(
                Finding(
                    CWD_OUTSIDE_WORKSPACE,
                    Severity.MEDIUM,
                    f"Shell command runs outside the workspace: {cwd}",
                )
            )
    findings = analyze_shell(command, ctx, rules, cwd=cwd)
    return sorted(extra + findings, key=lambda f: -f.severity)


def _invalid(tool: str, argument: str) -> Finding:
    return Finding(
        INVALID_ARGUMENTS,
        Severity.HIGH,
        f"{tool}: argument {argument!r} is missing or not a string; cannot analyse",
    )
