"""A command's words as the chain of commands it starts: the command itself, then each
one its wrappers run (``sudo env nice rm`` is sudo, env, nice and rm)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import cast

from tether.governance.paths import DYNAMIC
from tether.governance.shell_words import normalize_name
from tether.governance.wrappers import (
    Invocation,
    executes_stdin,
    find_args,
    unwrap,
    working_directory,
)

MAX_UNWRAP = 8  # sudo env nice timeout ... chains


@dataclass(frozen=True)
class Link:
    """One command of a wrapper chain, with its position in the original words."""

    name: str | None
    args: tuple[str, ...]
    offset: int
    stdin_args: bool = False
    word: str = ""  # the command word as written (a path for ./install.sh)
    chdir: str | None = None  # env -C dir cmd: the directory cmd runs in (as written)


def unwrap_chain(words: list[str]) -> list[Link]:
    """The command plus everything its wrappers start (``sudo env rm`` -> 3 links)."""
    first = words[0]
    name = _command_name(first)
    args = find_args(words[1:]) if name == "find" else tuple(words[1:])
    chain = [Link(name, args, 0, word=first)]
    todo = [chain[0]]
    while todo and len(chain) < MAX_UNWRAP:
        link = todo.pop()
        if link.name is None:
            continue
        for inv in unwrap(link.name, link.args):
            chain.append(_link_for(inv, link))
            todo.append(chain[-1])
    return chain


def _command_name(word: str) -> str | None:
    """The command a word runs, or None when it is only known at run time: a dynamic
    part, or a glob pattern, which the shell replaces with the files it matches
    (``/???/r? -rf /`` runs ``/bin/rm``)."""
    if DYNAMIC in word or _GLOB.search(word):
        return None
    return normalize_name(word)


# A glob pattern: "*", "?" or a bracket expression ("[" alone is the test command).
_GLOB = re.compile(r"[*?]|\[[^\]]*\]")


def _link_for(inv: Invocation, parent: Link) -> Link:
    head = inv.argv[0]
    name = _command_name(head)
    moved = working_directory(cast(str, parent.name), parent.args)
    chdir = parent.chdir
    if moved is not None:  # env -C a env -C b cmd: b within a
        chdir = posixpath.join(chdir, moved) if chdir is not None else moved
    return Link(
        name,
        find_args(inv.argv[1:]) if name == "find" else inv.argv[1:],
        parent.offset + 1 + inv.offset,
        inv.stdin_args or parent.stdin_args,
        head,
        chdir,
    )


def stdin_executors(chain: list[Link]) -> tuple[str | None, ...]:
    """The commands of a chain that run their stdin as code."""
    return tuple(
        link.name for link in chain if executes_stdin(link.name, link.args, link.stdin_args)
    )
