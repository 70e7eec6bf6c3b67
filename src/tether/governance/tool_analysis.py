"""Findings for tools Tether does not know from the inside (MCP tools, above all).

Such a tool cannot be parsed like a shell command; what it declares about itself (MCP's
tool annotations) sets a base severity, and user rules of kind ``tool`` can name it.
The annotations are hints from the server, so they only ever raise caution where they
warn; an unannotated tool is treated as able to change things (MEDIUM).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tether.governance.findings import Finding, Severity
from tether.governance.rules import Rule, name_matches

DESTRUCTIVE = "mcp.destructive"
OPEN_WORLD = "mcp.open-world"
READ_ONLY = "mcp.read-only"
UNANNOTATED = "mcp.unannotated"


def annotation_finding(tool_name: str, annotations: Mapping[str, object]) -> Finding:
    """The base finding for an external tool from its declared hints."""
    if annotations.get("destructiveHint") is True:
        return Finding(DESTRUCTIVE, Severity.HIGH, f"{tool_name} declares it may destroy data")
    if annotations.get("readOnlyHint") is True:
        return Finding(READ_ONLY, Severity.LOW, f"{tool_name} declares it only reads")
    if annotations.get("openWorldHint") is True:
        return Finding(OPEN_WORLD, Severity.MEDIUM, f"{tool_name} reaches outside systems")
    return Finding(UNANNOTATED, Severity.MEDIUM, f"{tool_name} declares no hints about its effects")


def tool_rule_findings(tool_name: str, rules: Sequence[Rule]) -> list[Finding]:
    """Findings of the ``kind = "tool"`` rules that name this tool."""
    return [
        Finding(rule.id, rule.severity, rule.description)
        for rule in rules
        if rule.kind == "tool" and rule.tool is not None and name_matches(tool_name, rule.tool)
    ]
