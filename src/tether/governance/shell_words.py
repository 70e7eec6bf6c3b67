"""Small, pure helpers for shell words: unquoting, escapes and option parsing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from tether.governance.paths import DYNAMIC

# A backslash-newline outside single quotes is removed by the shell before
# anything else. tree-sitter-bash splits words at it (`r\<newline>m` becomes two
# words), so it is removed up front; an escaped backslash before the newline
# (`foo\\<newline>`) is preserved.
_LINE_CONTINUATION = re.compile(r"(?<!\\)((?:\\\\)*)\\\n")
_UNQUOTED_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\([$`"\\\n])')
_ANSI_C_ESCAPE = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL
)
_ANSI_C_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
# A variable name nothing defines: put for a value only known at run time in a script
# that is parsed again, so that part stays unknown (a DYNAMIC mark in the text would
# make the whole script a command only known at run time).
UNKNOWN_VARIABLE = "$__TETHER_DYNAMIC__"
_SHORT_CLUSTER = re.compile(r"^-[A-Za-z0-9]+$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def remove_line_continuations(script: str) -> str:
    """Drop backslash-newline pairs, as the shell does before tokenising."""
    return _LINE_CONTINUATION.sub(r"\1", script)


def unescape_unquoted(text: str) -> str:
    """Remove quoting backslashes from an unquoted word (``\\rm`` is ``rm``)."""
    return _UNQUOTED_ESCAPE.sub(r"\1", text)


def unescape_double_quoted(text: str) -> str:
    """Remove the backslashes that are special inside double quotes."""
    return _DOUBLE_QUOTED_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def decode_ansi_c(body: str) -> str:
    """Decode the body of a ``$'...'`` string (``$'\\x72\\x6d'`` is ``rm``)."""
    return _ANSI_C_ESCAPE.sub(_decode_ansi_c_escape, body)


def _decode_ansi_c_escape(match: re.Match[str]) -> str:
    esc = match.group(1)
    head = esc[0]
    if head in "xuU" and len(esc) > 1:
        return _safe_chr(int(esc[1:], 16))
    if head.isdigit() and head in "01234567":
        return _safe_chr(int(esc, 8))
    if head == "c" and len(esc) == 2:
        return chr(ord(esc[1]) & 0x1F)
    return _ANSI_C_SIMPLE.get(esc, "\\" + esc)


def _safe_chr(code: int) -> str:
    try:
        return chr(code)
    except (ValueError, OverflowError):
        return "\ufffd"


def normalize_name(word: str) -> str:
    """The command a word names: basename of a path (``/bin/rm`` is ``rm``)."""
    return word.rsplit("/", 1)[-1] if "/" in word.rstrip("/") else word


def is_assignment(word: str) -> bool:
    """True for ``NAME=value`` words (env-style assignments)."""
    return bool(_ASSIGNMENT.match(word))


def is_option(word: str) -> bool:
    """True for words that look like options (``-x``, ``--long``), not ``-`` alone."""
    return len(word) > 1 and word.startswith("-") and DYNAMIC not in word


@lru_cache(maxsize=4096)
def flag_set(args: tuple[str, ...]) -> frozenset[str]:
    """All options present in ``args`` before ``--``.

    Short clusters are split (``-rf`` yields ``-rf``, ``-r`` and ``-f``); the first
    letter of any single-dash word is included (``-i.bak`` yields ``-i``); long
    options lose their ``=value``; purely numeric words (``-9``) stay whole.
    """
    flags: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if not is_option(arg):
            continue
        if arg.startswith("--"):
            flags.add(arg.split("=", 1)[0])
            continue
        flags.add(arg)
        flags.add(arg[:2])
        if _SHORT_CLUSTER.match(arg) and not arg[1:].isdigit():
            flags.update("-" + c for c in arg[1:])
    return frozenset(flags)


def positional_args(args: Sequence[str]) -> list[str]:
    """Arguments that are not options (everything after ``--`` counts)."""
    result: list[str] = []
    after_dashdash = False
    for arg in args:
        if after_dashdash:
            result.append(arg)
        elif arg == "--":
            after_dashdash = True
        elif not is_option(arg):
            result.append(arg)
    return result


def target_args(args: Sequence[str]) -> list[str]:
    """Words that may name files: positionals plus values of ``--opt=v`` and ``KEY=v``."""
    targets = positional_args(args)
    for arg in args:
        if (arg.startswith("--") and "=" in arg) or is_assignment(arg):
            targets.append(arg.split("=", 1)[1])
    return targets


def subcommand(args: Sequence[str], option_values: Sequence[str]) -> str | None:
    """First positional argument, skipping the values of ``option_values`` options."""
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--":
            continue
        if is_option(arg):
            skip = arg in option_values
            continue
        return arg
    return None


def short_option_value(args: tuple[str, ...], option: str) -> str | None:
    """The value of ``-u 3`` / ``-u3`` in a builtin's words."""
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(option) and len(arg) > len(option) and not arg.startswith("--"):
            return arg[len(option) :]
    return None
