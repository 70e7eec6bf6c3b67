"""Patterns a person's decision can be remembered by: the exact call, or similar calls.

Pure: no I/O. ``exact`` is the literal call (its arguments, the timeout aside).
``similar`` is derived from the parsed shell command: the program as written, its
subcommand, every option and every argument but the last stay fixed; the last argument
becomes a wildcard (``git push origin main`` -> ``git push origin *``). A wildcard
stands for exactly one plain word: never an option, a glob or anything dynamic. Only a
single simple command with no redirection, pipe, substitution, wrapper or variable
assignment has a similar pattern; anything else can only be remembered exactly.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from tether.governance.context import AnalysisContext
from tether.governance.paths import DYNAMIC
from tether.governance.shell_parse import parse_script

SHELL_TOOL = "execute_shell_command"
WILDCARD_TEXT = "*"
# Arguments that change how long a call may run, not what it does.
_IGNORED_ARGUMENTS = ("timeout",)
_GLOB_CHARS = ("*", "?", "[", DYNAMIC)

#: A similar pattern: words as written, None where any plain word may stand.
Words = tuple[str | None, ...]


def exact_key(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """A canonical text for the literal call (same tool, same arguments)."""
    kept = {k: v for k, v in arguments.items() if k not in _IGNORED_ARGUMENTS}
    return json.dumps([tool_name, kept], sort_keys=True, separators=(",", ":"))


def _literal_words(arguments: Mapping[str, Any], ctx: AnalysisContext) -> list[str] | None:
    """The command's words if it is one plain simple command, else None."""
    command = arguments.get("command")
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    parsed = parse_script(command, ctx, None)
    unread = parsed.syntax_error or parsed.too_deep or parsed.too_large or parsed.too_wide
    if unread or len(parsed.commands) != 1:
        return None
    (cmd,) = parsed.commands
    if cmd.redirects or cmd.pipe_into or cmd.executed_by or cmd.stdin_args or not words:
        return None
    # The parser drops variable assignments and normalises the program to its basename;
    # the words as written must say exactly what the parser saw, or they are not plain.
    if cmd.name != posixpath.basename(words[0]) or tuple(words[1:]) != cmd.args:
        return None
    if any(DYNAMIC in word for word in words):
        return None
    return words


def _plain(word: str) -> bool:
    return not word.startswith("-") and not any(c in word for c in _GLOB_CHARS)


def similar_words(
    tool_name: str, arguments: Mapping[str, Any], ctx: AnalysisContext
) -> Words | None:
    """The similar pattern of a shell call, or None when it has none."""
    words = plain_words(tool_name, arguments, ctx)
    if words is None:
        return None
    # The first word after the program may be a subcommand: it is never widened.
    if len(words) >= 3 and _plain(words[-1]):
        return (*words[:-1], None)
    return tuple(words)


def plain_words(
    tool_name: str, arguments: Mapping[str, Any], ctx: AnalysisContext
) -> list[str] | None:
    """The words of a shell call that is one plain command (what similar patterns match)."""
    if tool_name != SHELL_TOOL or arguments.get("cwd"):
        return None
    return _literal_words(arguments, ctx)


def words_match(pattern: Sequence[str | None], words: Sequence[str] | None) -> bool:
    """True if plain ``words`` (from :func:`plain_words`) have the pattern's shape."""
    if words is None or len(words) != len(pattern):
        return False
    return all(
        word == expected if expected is not None else _plain(word)
        for word, expected in zip(words, pattern, strict=True)
    )


def matches_similar(
    pattern: Sequence[str | None],
    tool_name: str,
    arguments: Mapping[str, Any],
    ctx: AnalysisContext,
) -> bool:
    """True if the call is a plain command of the pattern's shape."""
    return words_match(pattern, plain_words(tool_name, arguments, ctx))


def pattern_text(pattern: Sequence[str | None]) -> str:
    """The pattern as a person reads it (``git push origin *``)."""
    return " ".join(WILDCARD_TEXT if w is None else shlex.quote(w) for w in pattern)


def exact_text(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """The literal call as a person reads it."""
    command = arguments.get("command")
    if tool_name == SHELL_TOOL and isinstance(command, str):
        return command
    path = arguments.get("path")
    if isinstance(path, str):
        return f"{tool_name} {path}"
    return tool_name
