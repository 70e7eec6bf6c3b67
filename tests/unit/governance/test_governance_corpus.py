"""Corpus tests: dangerous commands are caught, everyday commands pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.governance.context import AnalysisContext
from tether.governance.findings import Severity, worst
from tether.governance.levels import decide
from tether.governance.rules import Rule
from tether.governance.shell_analysis import analyze_shell

_HERE = Path(__file__).parent
NEWLINE_MARK = "⏎"


def _lines(name: str) -> list[str]:
    text = (_HERE / name).read_text(encoding="utf-8")
    return [
        line.rstrip("\n")
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def load_graded(name: str) -> list[tuple[Severity, str]]:
    """Lines of "<SEVERITY> <command>"."""
    cases = []
    for line in _lines(name):
        severity, _, command = line.partition(" ")
        cases.append((Severity[severity], command.strip().replace(NEWLINE_MARK, "\n")))
    return cases


def load_plain(name: str) -> list[str]:
    return [line.replace(NEWLINE_MARK, "\n") for line in _lines(name)]


DANGEROUS = load_graded("corpus_dangerous.txt")
MEDIUM = load_graded("corpus_medium.txt")
SAFE = load_plain("corpus_safe.txt")


def _id(command: str) -> str:
    return command.replace("\n", "⏎")[:60]


def test_corpus_sizes() -> None:
    assert len(DANGEROUS) >= 60
    assert sum(1 for severity, _ in DANGEROUS if severity is Severity.CRITICAL) >= 60
    assert len(SAFE) >= 60
    assert len({c for _, c in DANGEROUS}) == len(DANGEROUS), "duplicate corpus entries"
    assert len(set(SAFE)) == len(SAFE), "duplicate corpus entries"


@pytest.mark.parametrize(("minimum", "command"), DANGEROUS, ids=[_id(c) for _, c in DANGEROUS])
def test_dangerous_command_is_not_allowed(
    minimum: Severity, command: str, ctx: AnalysisContext, rules: list[Rule]
) -> None:
    findings = analyze_shell(command, ctx, rules)
    top = worst(findings)
    assert top is not None and top >= minimum, findings
    assert decide("auto", findings) != "allow"
    if minimum is Severity.CRITICAL:
        assert decide("off", findings) == "deny"


@pytest.mark.parametrize(("minimum", "command"), MEDIUM, ids=[_id(c) for _, c in MEDIUM])
def test_medium_command_asks_only_in_smart(
    minimum: Severity, command: str, ctx: AnalysisContext, rules: list[Rule]
) -> None:
    findings = analyze_shell(command, ctx, rules)
    assert worst(findings) is Severity.MEDIUM, findings
    assert decide("auto", findings) == "allow"
    assert decide("smart", findings) == "ask"


@pytest.mark.parametrize("command", SAFE, ids=[_id(c) for c in SAFE])
def test_everyday_command_is_allowed(command: str, ctx: AnalysisContext, rules: list[Rule]) -> None:
    findings = analyze_shell(command, ctx, rules)
    assert all(f.severity < Severity.MEDIUM for f in findings), findings
    assert decide("auto", findings) == "allow"
    assert decide("smart", findings) == "allow"


#: Tether's default layout, where the workspace lies inside TETHER_HOME: a glob in the
#: workspace (``ls *``) once read as reaching Tether's state, and was refused.
DEFAULT_LAYOUT = AnalysisContext(
    workspace=Path("/home/u/.tether/workspace"),
    home=Path("/home/u"),
    tether_home=Path("/home/u/.tether"),
)


#: There, ``..`` is TETHER_HOME: these reach past the workspace into Tether's state and
#: ask, as they should. The last is a false alarm older than the layout's test: docker's
#: ``-v SRC:DST`` is read as one path, which lies in TETHER_HOME.
_PAST_THE_WORKSPACE = {
    "ln -s ../shared shared",
    "cd .. && ls",
    "ln -sf ../shared shared; cat shared/README.md",
    'docker run --rm -v "$PWD":/app -w /app node:20 npm test',
}
SAFE_IN_DEFAULT_LAYOUT = [c for c in SAFE if c not in _PAST_THE_WORKSPACE]


@pytest.mark.parametrize(
    "command", SAFE_IN_DEFAULT_LAYOUT, ids=[_id(c) for c in SAFE_IN_DEFAULT_LAYOUT]
)
def test_everyday_command_is_allowed_in_the_default_layout(command: str, rules: list[Rule]) -> None:
    findings = analyze_shell(command, DEFAULT_LAYOUT, rules)
    assert all(f.severity < Severity.MEDIUM for f in findings), findings
    assert decide("auto", findings) == "allow"
