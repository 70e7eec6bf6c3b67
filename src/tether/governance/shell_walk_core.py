"""The tree walk's core: the shell state the walk tracks, parsing a script one nesting
level deeper, subshells, and what a substitution's output flows into.

The rest of the walk is composed on top of ``WalkerCore`` (see ``shell_parse._Walker``):
words and their expansion, variables, files, redirections and the scripts commands carry.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from tether.governance.context import AnalysisContext
from tether.governance.paths import DYNAMIC
from tether.governance.shell_records import Redirect, SimpleCommand
from tether.governance.shell_words import UNKNOWN_VARIABLE, remove_line_continuations

MAX_DEPTH = 5  # nested bash -c / eval / here-doc scripts
MAX_SCRIPT_CHARS = 100_000
# Each stage of a pipeline is told the distinct commands downstream of it (what rules
# such as "curl piped into sh" look for). Kept to distinct names, a long pipeline costs
# time in proportion to its length (repeated, a 20,000-character "a|a|..." took 25 s);
# past this many distinct names it could again take minutes, and is not judged: a
# script that cannot be checked is refused, never allowed unread.
MAX_PIPE_NAMES = 64
# Each simple command costs about 0.1 ms to judge; past this many (a script of half a
# megabyte of commands would be minutes of work) the script is not judged either.
MAX_COMMANDS = 5_000
MAX_LOOP_VALUES = 4  # for-loop values bound one by one before giving up
MAX_BOUND_LOOPS = 2  # nested loops whose values are bound; deeper ones run once, unknown
MAX_CALLS = 16  # function calls whose body is walked again with the call's arguments
SOURCE_CHARS = 200

SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
_EXPANSIONS = SUBSTITUTIONS | {"simple_expansion", "expansion", "arithmetic_expansion"}


_language: Language | None = None
_parser: Parser | None = None
# Parser objects are not safe to share between threads; parsing is quick, so a
# lock around the singleton is simpler than one parser per thread.
_parser_lock = threading.Lock()


def _parse(text: str) -> Tree:
    global _language, _parser
    with _parser_lock:
        if _parser is None:
            _language = Language(tree_sitter_bash.language())
            _parser = Parser(_language)
        return _parser.parse(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Env:
    """Context inherited down the tree (not shell state: that lives on the walker)."""

    redirects: tuple[Redirect, ...] = ()
    in_pipe: bool = False
    background: bool = False
    stdin_literal: str | None = None
    #: The records whose output is the stdin here (a pipe, a process substitution, a
    #: descriptor, a downloaded file): what ``read`` takes in comes from them.
    stdin_records: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Saved:
    """Shell state as it was before a subshell."""

    cwd: str | None
    variables: dict[str, str]
    arrays: dict[str, tuple[str, ...]]
    positional: tuple[str, ...] | None


@dataclass(frozen=True)
class Source:
    """What a descriptor reads: the output of some records, a literal text, or
    something only known at run time (``<&$fd``)."""

    records: tuple[int, ...] = ()
    literal: str | None = None
    unknown: bool = False


def node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _only_literal_dollars(root: Node) -> bool:
    """Whether every error in a parse is a lone ``$`` in a word (``sed s/a$/b/``): bash
    reads a ``$`` that no name, brace or parenthesis follows as itself, the grammar as
    an error."""
    pending = [root]
    while pending:
        node = pending.pop()
        if node.is_missing:
            return False
        if node.type == "ERROR":
            parent = node.parent
            if node_text(node) != "$" or parent is None or parent.type not in _DOLLAR_HOMES:
                return False
            continue
        if node.has_error:
            pending.extend(node.children)
    return True


# Where a lone "$" error stands when it is part of a word.
_DOLLAR_HOMES = ("concatenation", "command")


def has_expansion(node: Node) -> bool:
    if node.type in _EXPANSIONS:
        return True
    return any(has_expansion(child) for child in node.named_children)


def find_substitutions(node: Node) -> list[Node]:
    """Outermost command/process substitutions inside ``node``."""
    if node.type in SUBSTITUTIONS:
        return [node]
    found: list[Node] = []
    for child in node.named_children:
        found.extend(find_substitutions(child))
    return found


def joined(first: tuple[str | None, ...], second: tuple[str | None, ...]) -> tuple[str | None, ...]:
    """``first``, then the names of ``second`` it does not hold yet (rules only ask
    whether a name is there, and a pipeline repeating one command stays short)."""
    if not second:
        return first
    have = set(first)
    return first + tuple(n for n in dict.fromkeys(second) if n not in have)


class WalkerCore(abc.ABC):
    """Walks tree-sitter nodes, tracking the little shell state that matters.

    State: current directory (``cd``), literal variable values (``x=/``) and the
    functions being defined (for fork-bomb detection).
    """

    def __init__(self, ctx: AnalysisContext, cwd: str | None) -> None:
        self.ctx = ctx
        self.cwd = cwd
        self.variables: dict[str, str] = {}
        self.functions: list[str] = []
        self.downloads: dict[str, list[int]] = {}  # file -> records that downloaded it
        self.written: dict[str, str] = {}  # file -> the literal text written to it
        self.exported: set[str] = set()  # variables given to the commands run (export)
        # Records whose output a variable may hold (x=$(curl ...), read x < <(curl ...)),
        # and the variables declared integers (declare -i: assigning evaluates).
        self.taints: dict[str, tuple[int, ...]] = {}
        self.integers: set[str] = set()
        self.namerefs: dict[str, str] = {}  # declare -n r=x: r -> x
        self.arrays: dict[str, tuple[str, ...]] = {}  # a=(x y): the words of "${a[@]}"
        # $1, $2... and "$@" where known (set --, a function's or bash -c's arguments).
        self.positional: tuple[str, ...] | None = None
        # What a command name runs instead (alias ls=rm, hash -p /bin/rm ls).
        self.aliases: dict[str, str] = {}
        self.function_bodies: dict[str, tuple[Node, bytes]] = {}
        self.calls = 0  # function bodies walked again for a call's arguments
        self.cdpath = False  # CDPATH set: cd to a relative name may go anywhere
        self.links: dict[str, str] = {}  # ln -s target name: name -> target, resolved
        # Descriptors opened by a bare exec (exec 3< <(curl x)), for later commands.
        self.descriptors: dict[str, Source] = {}
        self.depth = 0
        self.out: list[SimpleCommand] = []
        self.syntax_error = False
        self.too_deep = False
        self.too_large = False
        self.too_wide = False
        self.loops = 0  # for-loops being walked, one inside the other
        self.sources: list[bytes] = []  # the text of each script being walked, innermost last

    def run_script(self, text: str, env: Env) -> None:
        """Parse ``text`` and walk it one nesting level deeper."""
        with self._deeper(text) as root:
            if root is None:
                return
            if root.has_error and not _only_literal_dollars(root):
                self.syntax_error = True
            self.walk(root, env)

    @contextlib.contextmanager
    def _deeper(self, text: str) -> Iterator[Node | None]:
        """``text`` parsed, its walk one nesting level deeper; None (the walk marked too
        deep or too large) past the limits."""
        if self.depth > MAX_DEPTH:
            self.too_deep = True
            yield None
            return
        if len(text) > MAX_SCRIPT_CHARS:
            self.too_large = True
            yield None
            return
        root = _parse(remove_line_continuations(text)).root_node
        self.depth += 1
        self.sources.append(root.text or b"")
        try:
            yield root
        finally:
            self.sources.pop()
            self.depth -= 1

    def nested_script(self, text: str, env: Env, source: str) -> None:
        """Analyse a script string; a partly dynamic one also counts as a dynamic command."""
        if DYNAMIC in text:
            self.out.append(SimpleCommand(None, (), source=source[:SOURCE_CHARS], cwd=self.cwd))
            text = text.replace(DYNAMIC, UNKNOWN_VARIABLE)
        self.run_script(text, env)

    @abc.abstractmethod
    def walk(self, node: Node, env: Env) -> None:
        """Walk any node, dispatching on its type (the composed walker knows the types:
        ``shell_parse._Walker``)."""

    def walk_children(self, node: Node, env: Env) -> None:
        """Walk named children; a statement followed by ``&`` runs in the background."""
        if node.type == "ERROR" or node.is_missing:
            self.syntax_error = True
        for child in node.named_children:
            sibling = child.next_sibling
            child_env = env
            if sibling is not None and sibling.type == "&" and not env.background:
                child_env = dataclasses.replace(env, background=True)
            self.walk(child, child_env)

    def _save(self) -> _Saved:
        """The shell state a subshell or pipeline stage gets a copy of."""
        return _Saved(self.cwd, dict(self.variables), dict(self.arrays), self.positional)

    def _restore(self, saved: _Saved) -> None:
        self.cwd, self.variables = saved.cwd, saved.variables
        self.arrays, self.positional = saved.arrays, saved.positional

    def _subshell(self, node: Node, env: Env) -> None:
        saved = self._save()
        self.walk_children(node, env)
        self._restore(saved)

    def walk_substitution(
        self, node: Node, downstream: tuple[str | None, ...], executors: tuple[str | None, ...]
    ) -> None:
        """Walk a ``$(...)`` / ``<(...)`` whose output flows into ``downstream``."""
        start = len(self.out)
        self._subshell(node, Env())
        self._tag(start, len(self.out), downstream, executors)

    def _tag(
        self,
        start: int,
        end: int,
        downstream: tuple[str | None, ...],
        executors: tuple[str | None, ...],
    ) -> None:
        if not downstream and not executors:
            return
        for k in range(start, end):
            rec = self.out[k]
            self.out[k] = dataclasses.replace(
                rec,
                pipe_into=joined(rec.pipe_into, downstream),
                executed_by=joined(rec.executed_by, executors),
            )
