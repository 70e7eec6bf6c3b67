"""Makefiles and make's command line, read for the shell command lines they run.

A makefile runs its recipes (lines led by a tab, or after ``;`` on a rule's line),
``$(shell cmd)`` and ``VAR != cmd`` with the shell. Make's own references in them are
expanded first: a variable the same text (or make's command line, or make's
defaults) defines as plain text is put in, any other reference is a value only known
at run time. ``$(eval ...)``, ``$(guile ...)``, ``load`` and a ``SHELL`` or
``.SHELLFLAGS`` that is not a plain shell make what runs unknowable: DYNAMIC.
The makefile comes from ``-f -`` (stdin), ``--eval`` / ``-E`` text, or a file written
earlier in the same command; variables on make's command line (``make CC='cmd;'``)
and in ``MAKEFLAGS`` reach every recipe that uses them, so their values are parsed as
command lines too. Like carried_scripts, this is parsing knowledge.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from tether.governance.paths import DYNAMIC
from tether.governance.shell_words import UNKNOWN_VARIABLE, normalize_name

MAKES = frozenset({"make", "gmake", "remake", "bmake", "pmake"})
# Options taking a value in the next word (or attached: -fFILE, --file=FILE).
_VALUES = frozenset(
    {"-f", "--file", "--makefile", "-C", "--directory", "-I", "--include-dir", "-o"}
    | {"--old-file", "--assume-old", "-W", "--what-if", "--new-file", "--assume-new"}
    | {"--eval", "-E", "--jobserver-style"}
)
_FILE_OPTIONS = ("-f", "--file", "--makefile")
_EVAL_OPTIONS = ("--eval", "-E")
_STDIN_FILES = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
# NAME = value, NAME := value ... on the command line or in a makefile.
_ASSIGNMENT = re.compile(r"^\s*(?:override\s+|export\s+)*([^\s:#=!?+]+)\s*(::?=|:::=|\+=|\?=|!=|=)")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"})
# Make's defaults for the variables recipes use most.
_DEFAULTS = {
    "MAKE": "make",
    "CC": "cc",
    "CXX": "g++",
    "CPP": "cc -E",
    "AR": "ar",
    "AS": "as",
    "LD": "ld",
    "RM": "rm -f",
    "LEX": "lex",
    "YACC": "yacc",
    "FC": "f77",
}
_MAX_EXPANSION = 8  # levels of references within references
# Past this many characters an expansion is not followed (a variable made of 30
# references to one made of 30 more... grows exponentially): the rest is unknown.
_MAX_EXPANDED = 20_000


def make_options(args: Sequence[str]) -> list[tuple[str, str, int]]:
    """(option, value, index of the word holding the value) for make's options with a
    value: ``-f FILE``, ``-fFILE``, ``--file=FILE``..."""
    found: list[tuple[str, str, int]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        if arg.startswith("--") and "=" in arg:
            option, value = arg.split("=", 1)
            if option in _VALUES:
                found.append((option, value, i))
        elif arg in _VALUES and i + 1 < len(args):
            found.append((arg, args[i + 1], i + 1))
            i += 1
        elif not arg.startswith("--") and arg[:2] in _VALUES and len(arg) > 2:
            found.append((arg[:2], arg[2:], i))
        i += 1
    return found


def makefile_indices(args: Sequence[str]) -> list[int]:
    """Indices of the words naming the makefiles make reads (``-f FILE``)."""
    return [index for option, _v, index in make_options(args) if option in _FILE_OPTIONS]


def makefile_names(args: Sequence[str]) -> list[str]:
    """The makefiles make reads: ``-f`` files, else the default names (in ``-C`` DIR)."""
    options = make_options(args)
    files = [value for option, value, _i in options if option in _FILE_OPTIONS]
    if files:
        return files
    directory = "/".join(value for option, value, _i in options if option in ("-C", "--directory"))
    prefix = directory + "/" if directory else ""
    return [prefix + name for name in ("GNUmakefile", "makefile", "Makefile")]


def reads_makefile_from_stdin(args: Sequence[str]) -> bool:
    """``make -f -`` (or ``-f /dev/stdin``): the makefile is make's stdin."""
    return any(
        option in _FILE_OPTIONS and value in _STDIN_FILES
        for option, value, _i in make_options(args)
    )


def make_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines make's command line runs: ``--eval`` / ``-E`` text (a makefile),
    variables set on it (their values end up in recipes; ``X != cmd`` runs cmd), and
    the options and variables in a ``MAKEFLAGS=...`` word."""
    if name not in MAKES:
        return []
    variables = command_line_variables(args)
    found: list[str] = []
    for option, value, _i in make_options(args):
        if option in _EVAL_OPTIONS:
            found.extend(makefile_scripts(value, variables))
    for word in _positionals(args):
        found.extend(variable_value_scripts(word))
    return found


def command_line_variables(args: Sequence[str]) -> dict[str, str]:
    """Plain ``NAME=value`` variables set on make's command line."""
    found: dict[str, str] = {}
    for word in _positionals(args):
        match = _ASSIGNMENT.match(word)
        if match and match.group(2) in ("=", ":=", "::=", ":::="):
            found[match.group(1)] = word[match.end() :].strip()
    return found


def _positionals(args: Sequence[str]) -> list[str]:
    """Make's words that are no option or option value: targets and variables."""
    taken = {index for _o, _v, index in make_options(args)}
    return [
        arg
        for i, arg in enumerate(args)
        if i not in taken and not (arg.startswith("-") and arg != "-")
    ]


def variable_value_scripts(word: str) -> list[str]:
    """Command lines a ``NAME=value`` word given to make (or in the environment of
    one) may run: the value, as recipes put it in (``make RM='rm -rf ~'``), its
    ``$(shell ...)``; ``NAME != cmd`` runs cmd; a ``SHELL`` or ``.SHELLFLAGS`` that is
    not a plain shell, or ``MAKEFLAGS`` holding more of these, is read accordingly."""
    match = _ASSIGNMENT.match(word)
    if match is None:
        return []
    variable, operator = match.group(1), match.group(2)
    value = word[match.end() :].strip()
    if variable in ("MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS"):
        return makeflags_scripts(value)
    if variable in ("SHELL", ".SHELLFLAGS"):
        return [] if _plain_shell_setting(variable, value) else [DYNAMIC]
    if variable == "MAKEFILES":
        return [DYNAMIC] if value.strip() else []
    found = _shell_functions(value, {})
    if operator == "!=" or (value and DYNAMIC not in value):
        found.append(_expand(value, {}))  # X != cmd runs cmd; X=value may be a recipe's
    return found


def makeflags_scripts(value: str) -> list[str]:
    """``MAKEFLAGS`` holds options and variables as make's command line does."""
    if DYNAMIC in value:
        return [DYNAMIC]
    try:
        words = shlex.split(value)
    except ValueError:
        return [DYNAMIC]
    if words and not words[0].startswith("-") and "=" not in words[0]:
        words[0] = "-" + words[0]  # MAKEFLAGS=ks: single letters without the dash
    return make_scripts("make", words)


def _plain_shell_setting(variable: str, value: str) -> bool:
    words = value.split()
    if variable == "SHELL":
        return len(words) == 1 and normalize_name(words[0]) in _SHELLS
    return all(re.fullmatch(r"-[A-Za-z]+|[a-z]+", word) for word in words)


def makefile_scripts(text: str, overrides: dict[str, str] | None = None) -> list[str]:
    """Command lines a makefile runs: its recipes, ``$(shell ...)`` and ``!=``
    assignments, with make's references put in; DYNAMIC for what only run time knows."""
    if DYNAMIC in text:
        return [DYNAMIC]
    lines = re.sub(r"\\\n", " ", text).split("\n")
    variables = dict(_DEFAULTS)
    for line in lines:
        match = _ASSIGNMENT.match(line) if not line.startswith("\t") else None
        if match and match.group(2) in ("=", ":=", "::=", ":::="):
            variables[match.group(1)] = line[match.end() :].strip()
        elif match and match.group(2) == "+=":
            before = variables.get(match.group(1), "")
            variables[match.group(1)] = f"{before} {line[match.end() :].strip()}".strip()
    variables.update(overrides or {})
    found = _shell_functions(text, variables)
    if re.search(r"\$[({](?:eval|guile)\s", text) or ".RECIPEPREFIX" in text:
        found.append(DYNAMIC)
    for line in lines:
        found.extend(_line_scripts(line, variables))
    return found


def _line_scripts(line: str, variables: dict[str, str]) -> list[str]:
    if line.startswith("\t"):
        return [_recipe(line[1:], variables)]
    stripped = _strip_comment(line).strip()
    if not stripped:
        return []
    if re.match(r"(?:-?load|guile)\s", stripped):
        return [DYNAMIC]
    match = _ASSIGNMENT.match(stripped)
    if match:
        variable, operator = match.group(1), match.group(2)
        value = stripped[match.end() :].strip()
        if variable in ("SHELL", ".SHELLFLAGS") and not _plain_shell_setting(variable, value):
            return [DYNAMIC]
        if variable in ("MAKEFLAGS", "MAKEFILES"):
            return [DYNAMIC]
        return [_expand(value, variables)] if operator == "!=" else []
    rule = re.match(r"[^:;=#]*::?(?!=)([^;#]*)(;.*)?$", stripped)
    if rule and rule.group(2):
        return [_recipe(rule.group(2)[1:], variables)]
    return []


def _strip_comment(line: str) -> str:
    match = re.search(r"(?<!\\)#", line)
    return line if match is None else line[: match.start()]


def _recipe(line: str, variables: dict[str, str]) -> str:
    """A recipe line as the shell gets it: its prefix (@ - +) dropped, references
    put in."""
    return _expand(line.lstrip(" \t@-+"), variables)


def _shell_functions(text: str, variables: dict[str, str]) -> list[str]:
    """The command lines of every ``$(shell ...)`` in ``text``."""
    found = []
    for match in re.finditer(r"\$([({])shell\s", text):
        body = _balanced(text, match.end(), match.group(1))
        found.append(_expand(body, variables) if body is not None else DYNAMIC)
    return found


def _balanced(text: str, start: int, opening: str) -> str | None:
    closing = ")" if opening == "(" else "}"
    depth = 1
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def _expand(
    text: str, variables: dict[str, str], level: int = 0, memo: dict[str, str] | None = None
) -> str:
    """``text`` with make's references put in: ``$$`` is ``$``, a known variable its
    value, ``$(shell cmd)`` the shell's ``$(cmd)``, anything else unknown."""
    memo = {} if memo is None else memo
    out: list[str] = []
    size = 0
    i = 0
    while i < len(text):
        if size > _MAX_EXPANDED:
            out.append(UNKNOWN_VARIABLE)
            break
        char = text[i]
        if char != "$" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following in "({":
            body = _balanced(text, i + 2, following)
            if body is None:
                out.append(UNKNOWN_VARIABLE)
                break
            out.append(_reference(body, variables, level, memo))
            i += len(body) + 3
        else:  # $@, $<, $X: a one-character variable
            out.append(_reference(following, variables, level, memo))
            i += 2
        size += len(out[-1])
    return "".join(out)


def _reference(body: str, variables: dict[str, str], level: int, memo: dict[str, str]) -> str:
    if body.startswith(("shell ", "shell\t")):
        return "$(" + _expand(body[6:], variables, level + 1, memo) + ")"
    if body in variables and level < _MAX_EXPANSION:
        if body not in memo:
            memo[body] = _expand(variables[body], variables, level + 1, memo)
        return memo[body]
    return UNKNOWN_VARIABLE
