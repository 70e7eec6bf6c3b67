"""Patterns a decision is remembered by: the exact call, and the similar pattern derived
from the parsed command (never wider than one plain word, never for a compound)."""

from __future__ import annotations

import pytest

from tether.governance.context import AnalysisContext
from tether.governance.patterns import (
    exact_key,
    exact_text,
    matches_similar,
    pattern_text,
    similar_words,
)

SHELL = "execute_shell_command"


def _similar(command: str, ctx: AnalysisContext) -> str | None:
    words = similar_words(SHELL, {"command": command}, ctx)
    return None if words is None else pattern_text(words)


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("git push origin main", "git push origin *"),
        ("git push --force origin main", "git push --force origin *"),
        ("npm install lodash", "npm install *"),
        ("ls -la /tmp", "ls -la *"),
        # The word after the program may be a subcommand: never widened.
        ("git status", "git status"),
        ("ls /tmp", "ls /tmp"),
        # An option last, or a glob, is kept as written.
        ("git log --oneline", "git log --oneline"),
        ("ls -la '*.py'", "ls -la '*.py'"),
        ("/usr/bin/git push origin main", "/usr/bin/git push origin *"),
        ("echo 'a b' c", "echo 'a b' *"),
    ],
)
def test_similar_pattern_of_a_plain_command(
    command: str, pattern: str, ctx: AnalysisContext
) -> None:
    assert _similar(command, ctx) == pattern


@pytest.mark.parametrize(
    "command",
    [
        "git push origin main | tee log",
        "git push origin main > out.txt",
        "git push origin main && rm -rf x",
        "sudo git push origin main",
        "FOO=1 git push origin main",
        "git push origin $BRANCH",
        "git push origin $(cat branch)",
        "git push origin main # comment",
        "git push 'origin",
        "",
    ],
)
def test_no_similar_pattern_for_anything_but_one_plain_command(
    command: str, ctx: AnalysisContext
) -> None:
    assert _similar(command, ctx) is None


def test_no_similar_pattern_for_other_tools_or_a_cwd(ctx: AnalysisContext) -> None:
    assert similar_words("write_file", {"path": "a.txt", "content": "x"}, ctx) is None
    assert similar_words(SHELL, {"command": "git push origin main", "cwd": "sub"}, ctx) is None


@pytest.mark.parametrize(
    ("command", "matches"),
    [
        ("git push origin dev", True),
        ("git push origin main", True),
        ("git push --force origin main", False),
        ("git push origin -f", False),
        ("git push origin main extra", False),
        ("git push upstream main", False),
        ("git push origin '*'", False),
        ("git push origin $(whoami)", False),
        ("git push origin dev > /etc/passwd", False),
        ("/tmp/git push origin dev", False),
        ("GIT_SSH_COMMAND=evil git push origin dev", False),
    ],
)
def test_matching_the_similar_pattern(command: str, matches: bool, ctx: AnalysisContext) -> None:
    pattern = similar_words(SHELL, {"command": "git push origin main"}, ctx)
    assert pattern is not None
    assert matches_similar(pattern, SHELL, {"command": command}, ctx) is matches


def test_exact_key_ignores_the_timeout_only() -> None:
    base = exact_key(SHELL, {"command": "make test"})
    assert exact_key(SHELL, {"command": "make test", "timeout": 30}) == base
    assert exact_key(SHELL, {"command": "make  test"}) != base
    assert exact_key(SHELL, {"command": "make test", "cwd": "sub"}) != base
    assert exact_key("other_tool", {"command": "make test"}) != base


def test_exact_text_is_what_a_person_reads() -> None:
    assert exact_text(SHELL, {"command": "git push origin main"}) == "git push origin main"
    assert exact_text("write_file", {"path": "notes.md", "content": "x"}) == "write_file notes.md"
    assert exact_text("get_current_time", {}) == "get_current_time"
