"""Analyse a shell command line: parse it, then match every simple command against rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tether.governance.context import AnalysisContext
from tether.governance.findings import Finding, Severity
from tether.governance.paths import MAX_BRACE_WORDS
from tether.governance.rules import Rule
from tether.governance.shell_match import rule_matches
from tether.governance.shell_parse import (
    MAX_COMMANDS,
    MAX_DEPTH,
    MAX_PIPE_NAMES,
    SimpleCommand,
    parse_script,
)

_SNIPPET_CHARS = 120

PARSE_ERROR = "shell.parse-error"
DYNAMIC_COMMAND = "shell.dynamic-command"
TOO_DEEP = "shell.nesting-too-deep"
TOO_LARGE = "shell.too-large"
TOO_WIDE = "shell.too-wide"


def analyze_shell(
    command: str,
    ctx: AnalysisContext,
    rules: Sequence[Rule],
    *,
    cwd: str | None = None,
) -> list[Finding]:
    """Findings for running ``command`` with ``bash -c`` in ``cwd`` (default: workspace).

    Input that does not parse cleanly, nests scripts deeper than the limit or
    names a command only known at run time yields a HIGH finding: governance
    never silently allows what it could not read.
    """
    parsed = parse_script(command, ctx, cwd)
    findings: list[Finding] = []
    if parsed.syntax_error:
        findings.append(
            Finding(PARSE_ERROR, Severity.HIGH, "Command does not parse as valid shell syntax")
        )
    if parsed.too_deep:
        findings.append(
            Finding(TOO_DEEP, Severity.HIGH, f"Scripts nested deeper than {MAX_DEPTH} levels")
        )
    if parsed.too_large:
        findings.append(Finding(TOO_LARGE, Severity.HIGH, "Script too large to analyse"))
    if parsed.too_wide:
        findings.append(
            Finding(
                TOO_WIDE,
                Severity.CRITICAL,
                f"Expands to more than can be checked (more than {MAX_COMMANDS} commands, "
                f"a pipeline through more than {MAX_PIPE_NAMES} different ones, or a brace "
                f"expansion of more than {MAX_BRACE_WORDS} words): split it or run it "
                "from a script file",
            )
        )
    shell_rules = [rule for rule in rules if rule.kind == "shell"]
    for cmd in parsed.commands:
        findings.extend(_command_findings(cmd, ctx, shell_rules))
    return dedupe(findings)


def _command_findings(
    cmd: SimpleCommand, ctx: AnalysisContext, rules: Sequence[Rule]
) -> Iterable[Finding]:
    snippet = _snippet(cmd.source)
    if cmd.name is None:
        yield Finding(
            DYNAMIC_COMMAND,
            Severity.HIGH,
            f"Command name is only known at run time and cannot be checked: {snippet}",
        )
    for rule in rules:
        if rule_matches(rule, cmd, ctx):
            yield Finding(rule.id, rule.severity, f"{rule.description}: {snippet}")


def _snippet(source: str) -> str:
    flat = " ".join(source.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 1] + "…"


def dedupe(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per rule id (the most severe), most severe first."""
    best: dict[str, Finding] = {}
    for finding in findings:
        current = best.get(finding.rule_id)
        if current is None or finding.severity > current.severity:
            best[finding.rule_id] = finding
    return sorted(best.values(), key=lambda f: -f.severity)
