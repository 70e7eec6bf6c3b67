"""The records a parsed script turns into: each command it may run, with its redirections.

Also what such a record obviously prints (``echo``, ``printf``, ``cat <<EOF``), which
the walk reads as the input of whatever comes next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tether.governance.paths import DYNAMIC
from tether.governance.shell_words import positional_args

WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<>"})
READ_OPS = frozenset({"<", "<>", "<&"})


@dataclass(frozen=True)
class Redirect:
    """A file redirection: operator (``>``, ``>>``, ``<``, ``&>``...) and target word."""

    op: str
    target: str

    @property
    def writes(self) -> bool:
        """True if the redirection opens the target for writing."""
        return self.op in WRITE_OPS

    @property
    def reads(self) -> bool:
        """True if the redirection opens the target for reading."""
        return self.op in READ_OPS


@dataclass(frozen=True)
class SimpleCommand:
    """One command the script may run.

    ``name`` is the command's basename, or None when it is produced at run time
    (``$CMD``, ``$(which rm)``) and cannot be trusted. ``pipe_into`` names the
    commands its output flows into (pipes and substitutions, None = dynamic);
    ``executed_by`` the subset that runs that output as code. ``cwd`` is the
    directory relative paths resolve against (None = unknown).
    """

    name: str | None
    args: tuple[str, ...]
    redirects: tuple[Redirect, ...] = ()
    pipe_into: tuple[str | None, ...] = ()
    executed_by: tuple[str | None, ...] = ()
    source: str = ""
    cwd: str | None = None
    self_spawning: bool = False
    stdin_args: bool = False
    stdin_literal: str | None = None


def stdout_literal(stage: list[SimpleCommand]) -> str | None:
    """Literal text a pipeline stage writes, when it is obvious (echo, printf, cat <<EOF)."""
    if len(stage) != 1:
        return None
    rec = stage[0]
    if rec.name in ("echo", "printf"):
        words = [a for a in rec.args if not (rec.name == "echo" and a in ("-n", "-e", "-E"))]
        text = _printf(words) if rec.name == "printf" else " ".join(words)
        if rec.name == "printf" or "-e" in rec.args:
            text = text.replace("\\n", "\n").replace("\\t", "\t")
    elif rec.name == "cat" and not positional_args(rec.args) and rec.stdin_literal is not None:
        text = rec.stdin_literal
    else:
        return None
    return None if DYNAMIC in text else text


def _printf(words: list[str]) -> str:
    """What ``printf FORMAT ARGS`` prints when its format takes only %s, %b, %d or %q:
    the format again for each set of arguments (``printf '%s\\n' a b``); else the
    words joined."""
    if words[:1] == ["--"]:
        words = words[1:]
    if not words:
        return ""
    form, rest = words[0], list(words[1:])
    directives = re.findall(r"%(.)", form.replace("%%", ""))
    if not directives or not rest or any(d not in "sbdq" for d in directives):
        return " ".join(words)
    out = []
    while rest:
        chunk = form.replace("%%", "\x01")
        for directive in directives:
            chunk = chunk.replace("%" + directive, rest.pop(0) if rest else "", 1)
        out.append(chunk.replace("\x01", "%"))
    return "".join(out)
