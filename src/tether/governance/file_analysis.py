"""Analyse file-tool accesses (read_file / write_file / edit_file)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from tether.governance.context import AnalysisContext
from tether.governance.findings import Finding, Severity
from tether.governance.paths import classify_path, expand_tilde
from tether.governance.rules import Rule, load_builtin_rules
from tether.governance.shell_analysis import dedupe

FileOp = Literal["read", "write", "edit"]

INVALID_PATH = "file.invalid-path"


def analyze_file_access(
    op: FileOp,
    path: str,
    ctx: AnalysisContext,
    rules: Sequence[Rule] | None = None,
) -> list[Finding]:
    """Findings for a file tool performing ``op`` on ``path``.

    Relative paths are resolved against the workspace and symlinks are followed
    with ``os.path.realpath`` (the only I/O in governance), so a link inside the
    workspace pointing elsewhere is judged by both where it sits and where it
    leads. ``rules`` defaults to the built-in rules; only ``kind = "file"`` rules
    apply.
    """
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        return [Finding(INVALID_PATH, Severity.HIGH, f"Invalid file path: {path!r}")]
    active = load_builtin_rules() if rules is None else rules
    try:
        lexical, real = _candidates(path, ctx)
    except OSError as exc:
        # A link replaced while it was followed (readlink: EINVAL): someone is moving
        # things under the path as it is judged. The tool opens only what it checked.
        why = f"The path changed while it was being checked ({exc.strerror}): {path!r}"
        return [Finding(INVALID_PATH, Severity.HIGH, why)]
    # Compare against a context resolved the same way (/tmp may be /private/tmp).
    real_ctx = AnalysisContext(
        workspace=Path(os.path.realpath(ctx.workspace)),
        home=Path(os.path.realpath(ctx.home)),
        tether_home=Path(os.path.realpath(ctx.tether_home)),
    )
    classes = classify_path(lexical, None, ctx) | classify_path(real, None, real_ctx)
    findings = [
        Finding(rule.id, rule.severity, f"{rule.description}: {path}")
        for rule in active
        if rule.kind == "file" and _file_rule_matches(rule, op, (lexical, real), classes)
    ]
    return dedupe(findings)


def _candidates(path: str, ctx: AnalysisContext) -> tuple[str, str]:
    """The path as written (normalised) and the path with symlinks resolved."""
    expanded = expand_tilde(path, str(ctx.home), None) if path.startswith("~") else path
    absolute = posixpath.join(str(ctx.workspace), expanded)  # join keeps absolute paths
    return posixpath.normpath(absolute), os.path.realpath(absolute)


def _file_rule_matches(
    rule: Rule, op: FileOp, paths: tuple[str, str], classes: frozenset[str]
) -> bool:
    if rule.ops is not None and op not in rule.ops:
        return False
    if rule.path_target is not None and rule.path_target not in classes:
        return False
    if rule.path_glob is not None:
        candidates = [*paths, *(posixpath.basename(p) for p in paths)]
        return any(fnmatchcase(c, g) for c in candidates for g in rule.path_glob)
    return True
