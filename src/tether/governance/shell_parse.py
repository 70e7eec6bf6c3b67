"""Parse a shell script with tree-sitter-bash into flat SimpleCommand records.

Every simple command the script could run becomes one record, wherever it sits:
pipelines, lists, subshells, functions, loops, ``$(...)``, backticks, process
substitutions, here-docs fed to shells, ``bash -c`` / ``eval`` strings (parsed
recursively) and wrappers (``sudo``, ``env``, ``xargs``...; both the wrapper
and the wrapped command get a record). Words are unquoted and joined the way
the shell would; anything only known at run time is marked with ``DYNAMIC``.
The walk is deliberately over-inclusive: a command that might not run is still
reported, because governance must judge what *could* happen.

This module is the entry point and the walk of statements and commands; the walk's
other parts, which ``_Walker`` composes, each have a module of their own:
``shell_walk_core`` (state, limits, nested scripts, subshells), ``shell_variables``
(assignment, taint, arithmetic), ``shell_expansion`` (words), ``shell_assignments``
(statements and builtins that set variables), ``shell_files`` (cd, links, files
written and run), ``shell_embedded`` (scripts commands carry) and
``shell_redirections`` (pipelines, redirections, descriptors). The records it makes
are in ``shell_records``, wrapper chains in ``shell_chain``.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from tree_sitter import Node

from tether.governance.carried_scripts import mounted_paths, written_files
from tether.governance.context import AnalysisContext
from tether.governance.makefiles import MAKES, variable_value_scripts
from tether.governance.paths import DYNAMIC, brace_words
from tether.governance.rules import in_command_set
from tether.governance.shell_assignments import Assignments
from tether.governance.shell_chain import Link, stdin_executors, unwrap_chain
from tether.governance.shell_expansion import brace_expanded, name_expands, nonempty
from tether.governance.shell_records import Redirect, SimpleCommand
from tether.governance.shell_redirections import Redirections, descriptor_path
from tether.governance.shell_walk_core import (
    MAX_BOUND_LOOPS,
    MAX_CALLS,
    MAX_COMMANDS,
    MAX_DEPTH,
    MAX_LOOP_VALUES,
    MAX_PIPE_NAMES,
    SOURCE_CHARS,
    Env,
    has_expansion,
    node_text,
)
from tether.governance.shell_words import UNKNOWN_VARIABLE
from tether.governance.wrappers import code_arg_indices, download_outputs, find_writes


@dataclass(frozen=True)
class ParsedScript:
    """Result of parsing: the commands plus reasons the parse cannot be trusted."""

    commands: tuple[SimpleCommand, ...]
    syntax_error: bool = False
    too_deep: bool = False
    too_large: bool = False
    #: It expands to more than can be checked: a pipeline through more than
    #: MAX_PIPE_NAMES distinct commands, more than MAX_COMMANDS commands, or a brace
    #: expansion past its limits.
    too_wide: bool = False


def parse_script(script: str, ctx: AnalysisContext, cwd: str | None = None) -> ParsedScript:
    """Parse ``script`` and return every simple command it may run.

    ``cwd`` is the starting directory (defaults to the workspace); ``cd`` with a
    literal argument moves it for later commands.
    """
    walker = _Walker(ctx, cwd if cwd is not None else str(ctx.workspace))
    walker.run_script(script, Env())
    return ParsedScript(
        commands=tuple(walker.out),
        syntax_error=walker.syntax_error,
        too_deep=walker.too_deep,
        too_large=walker.too_large,
        too_wide=walker.too_wide or len(walker.out) > MAX_COMMANDS,
    )


# Children of a command node that are not its name, words, assignments or redirections.
_COMMAND_EXTRAS = frozenset({"subshell", "compound_statement", "ERROR"})


class _Walker(Redirections, Assignments):
    """The whole walk: its parts composed, the dispatch on node types, and the
    statements and commands none of the parts owns."""

    # ------------------------------------------------------------ dispatch

    def walk(self, node: Node, env: Env) -> None:
        """Walk any node, dispatching on its type."""
        if len(self.out) > MAX_COMMANDS:
            self.too_wide = True
            return
        handler = _HANDLERS.get(node.type)
        if handler is not None:
            handler(self, node, env)
        else:
            self.walk_children(node, env)

    def _error(self, node: Node, env: Env) -> None:
        """Text that does not parse. A bare word opening with a brace group is what
        bash expands to a command (``{rm,-rf,/}`` runs ``rm -rf /``); the grammar reads
        it as a broken ``{ ...; }`` block (a ``{`` token, then the rest as a command),
        so each such word is judged here as bash would run it."""
        self.syntax_error = True
        children = node.children
        skip: set[int] = set()
        for i, child in enumerate(children[:-1]):
            after = children[i + 1]
            glued = child.type == "{" and child.end_byte == after.start_byte
            if glued and after.type == "command_name":  # a command node checks for itself
                self._brace_command(after, env)
                skip.add(i + 1)
        for i, child in enumerate(children):
            if child.is_named and i not in skip:
                self.walk(child, env)

    def _brace_command(self, node: Node, env: Env) -> None:
        """``node`` (a command, or its name) read after a ``{`` glued to it: the word
        ``{`` + its name is brace-expanded into the command and its first arguments."""
        name = node.child_by_field_name("name") if node.type == "command" else node
        if name is None:
            return
        arguments = node.children_by_field_name("argument") if node.type == "command" else []
        flat = [self.word(n) for n in (name, *arguments)]
        for _value, subs in flat:
            for sub in subs:  # $(...) in these words runs too
                self.walk_substitution(sub, (), ())
        words = nonempty(brace_words("{" + flat[0][0]))
        if words is None:
            self.too_wide = True
            return
        if not words or (has_expansion(name) and name_expands("{" + node_text(name))):
            words[:1] = [DYNAMIC]  # as in _command
        words += [value for value, _subs in flat[1:]]
        self._emit(unwrap_chain(words), env, ("{" + node_text(node))[:SOURCE_CHARS])

    def _ignore(self, node: Node, env: Env) -> None:
        return None

    def _function(self, node: Node, env: Env) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        name = node_text(name_node) if name_node is not None else ""
        if body is not None and self.sources:
            self.function_bodies[name] = (body, self.sources[-1])
        self.functions.append(name)
        try:
            if body is not None:
                self.walk(body, Env())
        finally:
            self.functions.pop()

    def _call(self, link: Link) -> None:
        """A call of a function defined earlier: its body is walked again with the
        call's arguments as ``$1``, ``"$@"`` (``f() { rm "$@"; }; f -rf ~``), a few
        times at most, never from inside itself."""
        name = cast(str, link.name)
        known = self.function_bodies.get(name)
        if known is None or name in self.functions or self.calls >= MAX_CALLS:
            return
        self.calls += 1
        body, source = known
        saved = self.positional
        self.positional = link.args
        self.functions.append(name)
        self.sources.append(source)
        try:
            self.walk(body, Env())
        finally:
            self.sources.pop()
            self.functions.pop()
            self.positional = saved

    def _for(self, node: Node, env: Env) -> None:
        var = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        values: list[str] = []
        for value_node in node.children_by_field_name("value"):
            value, subs = self.word(value_node)
            for sub in subs:
                self.walk_substitution(sub, (), ())
            values.append(value)
        if not values or len(values) > MAX_LOOP_VALUES:
            values = [*values[:MAX_LOOP_VALUES], DYNAMIC]
        if self.loops >= MAX_BOUND_LOOPS:
            values = [DYNAMIC]  # nested deeper: one walk, or the walks multiply
        if body is None:
            return
        self.loops += 1
        try:
            for value in values:
                if var is not None:
                    self.variables[node_text(var)] = value
                self.walk(body, env)
        finally:
            self.loops -= 1
        if var is not None:
            self.variables[node_text(var)] = DYNAMIC

    # ------------------------------------------------------------ commands

    def _command(self, node: Node, env: Env) -> None:
        name_node = node.child_by_field_name("name")
        environment: list[str] = []  # FOO=1 cmd: FOO is in cmd's environment
        for child in node.children:
            if child.type == "variable_assignment":
                for sub in self.word(child)[1]:
                    self.walk_substitution(sub, (), ())
                var, value = child.child_by_field_name("name"), child.child_by_field_name("value")
                if var is not None and value is not None:
                    assignment = f"{node_text(var)}={self.word(value)[0]}"
                    self._latent_substitutions(self.word(value)[0])
                    self._command_variable(assignment, node_text(child)[:SOURCE_CHARS])
                    environment.append(assignment)
                    self.cdpath = self.cdpath or assignment.startswith("CDPATH=")
        if name_node is None:
            self.walk_children(node, env)
            return
        for child in node.named_children:
            # What the grammar hangs on a command besides its words: the subshell of
            # "coproc (cmd)", a broken part. It may run, so it is read too.
            if child.type in _COMMAND_EXTRAS:
                self.walk(child, env)
        arguments = [
            n for n in node.children_by_field_name("argument") if not self._is_descriptor(n)
        ]
        read = self._words([name_node, *arguments]) + self._dropped_words(node)
        first = read[0]
        if self._after_glued_brace(node):
            # "{rm,-rf,/} | cat": the grammar took the "{" for a block; bash, for the
            # start of this word.
            first.value, first.raw, first.expands = "{" + first.value, "{" + first.raw, True
        expanded = brace_expanded(read, self._variable)
        if expanded is None:
            self.too_wide = True
            words, subs = [w.value for w in read], [w.subs for w in read]
        else:
            words, subs = expanded
        if not words:
            # Brace expansion left no word at all ({,} with nothing else): such rare
            # text is judged as a name that cannot be known, not as no command.
            words, subs = [DYNAMIC], [[]]
        elif has_expansion(name_node) and (not first.expands or name_expands(first.raw)):
            # A name built from a variable is never trusted, even when the
            # variable's value looks known: it is judged as the worst command.
            words[0] = DYNAMIC
        if words[0] in self.aliases:
            # alias ls=rm; ls -rf ~: what the name stands for, with these arguments; not
            # again within its own expansion (alias ls='ls -la'), as bash does
            rest = " ".join(UNKNOWN_VARIABLE if DYNAMIC in w else shlex.quote(w) for w in words[1:])
            body = self.aliases.pop(words[0])
            try:
                self.nested_script(f"{body} {rest}", Env(), node_text(node))
            finally:
                self.aliases[words[0]] = body
        chain = unwrap_chain(words)
        if any(link.name in MAKES for link in chain):
            self._make_environment(environment, node_text(node)[:SOURCE_CHARS])
        self._startup_files(node, chain, environment)
        sinks = self._walk_word_substitutions(chain, subs)
        info = self._redirections(c for c in node.children if c.type.endswith("_redirect"))
        substituted = len(self.out)
        for sub in info.subs:
            self.walk_substitution(sub, (), stdin_executors(chain))
        feeds = self._walk_feeds(info.feeds)
        read_fds = [fd for link in chain for a in link.args if (fd := descriptor_path(a))]
        source = self._stdin_source(info, feeds, range(substituted, len(self.out)), read_fds)
        cmd_env = self._redirected_env(env, info, source)
        start = len(self.out)
        self._emit(chain, cmd_env, node_text(node)[:SOURCE_CHARS])
        self._fed(feeds, source, start, start + len(chain))
        self._sinks(sinks + info.sinks, start, start + len(chain))
        self._open_descriptors(info, feeds, start, start + len(chain))

    def _startup_files(self, node: Node, chain: list[Link], environment: list[str]) -> None:
        """A shell runs the file ``BASH_ENV`` (or ``ENV``) names before its script:
        ``BASH_ENV=<(curl x) bash -c true`` runs the download, ``BASH_ENV=f`` a file
        written or downloaded earlier."""
        shells = [link.name for link in chain if link.name and in_command_set(link.name, "shells")]
        if not shells:
            return
        source = node_text(node)[:SOURCE_CHARS]
        for child in node.children:
            var = child.child_by_field_name("name") if child.type == "variable_assignment" else None
            value = child.child_by_field_name("value")
            if var is None or value is None or node_text(var) not in ("BASH_ENV", "ENV"):
                continue
            path, subs = self.word(value)
            for sub in subs:
                self.walk_substitution(sub, tuple(shells), tuple(shells))
            if not subs:
                self.run_file(path, shells[0], "sh", source)

    def _make_environment(self, environment: list[str], source: str) -> None:
        """make takes its environment as variables, which recipes put into the command
        lines they run (``RM='rm -rf ~' make clean``): the values of those set for it
        or exported are judged as make's command-line variables are."""
        exported = [
            f"{name}={self.variables[name]}"
            for name in sorted(self.exported)
            if DYNAMIC not in self.variables.get(name, DYNAMIC)
        ]
        for assignment in environment + exported:
            for script in variable_value_scripts(assignment):
                self.nested_script(script, Env(), source)

    def _walk_word_substitutions(self, chain: list[Link], subs: list[list[Node]]) -> list[Node]:
        """Walk substitutions in the command's words, knowing which ones are run as code.
        Returns the ``>(...)`` ones, which the command may write into: they are walked
        once its records are made (see ``_sinks``)."""
        names = tuple(link.name for link in chain)
        executors: dict[int, tuple[str | None, ...]] = {0: ("eval",)}  # $(...) as the name
        for link in chain:
            if link.name is None:
                continue
            for index in code_arg_indices(link.name, link.args):
                position = link.offset + 1 + index
                executors[position] = (*executors.get(position, ()), link.name)
        sinks: list[Node] = []
        for position, nodes in enumerate(subs):
            for sub in nodes:
                if sub.type == "process_substitution" and node_text(sub).startswith(">"):
                    sinks.append(sub)
                else:
                    self.walk_substitution(sub, names, executors.get(position, ()))
        return sinks

    def _emit(self, chain: list[Link], env: Env, source: str) -> None:
        if self.links:  # ln -s ~ h; cat h/.tether/token reads ~/.tether/token
            chain = [dataclasses.replace(k, args=self._through_links(k.args)) for k in chain]
            env = dataclasses.replace(
                env,
                redirects=tuple(
                    Redirect(r.op, self._through_links((r.target,))[0]) for r in env.redirects
                ),
            )
        for link in chain:
            redirects = env.redirects
            if link.name is not None:  # find -fprint f, sed 'w f', curl -o f, vim -c 'w f'
                written = find_writes(link.args) if link.name == "find" else []
                written += written_files(link.name, link.args)
                written += download_outputs(link.name, link.args)
                redirects += tuple(Redirect(">", w) for w in written)
            args = link.args + tuple(mounted_paths(link.name, link.args))
            spawning = (
                link.name is not None
                and link.name in self.functions
                and (env.in_pipe or env.background)
            )
            self.out.append(
                SimpleCommand(
                    name=link.name,
                    args=args,
                    redirects=redirects,
                    source=source,
                    cwd=self._directory_of(link),
                    self_spawning=spawning,
                    stdin_args=link.stdin_args,
                    stdin_literal=env.stdin_literal,
                )
            )
        first = len(self.out) - len(chain)
        for index, link in enumerate(chain, start=first):
            self._track_downloads(link, index, env)
            self._track_written(link, index, env)
            if link.name is not None:
                self._embedded_scripts(link, env, source)
                self._track_cd(link)
                self._builtin_assignments(link, env)
                self._track_names(link)
                self._track_link(link)
                self._project_files(link, source)
                self._call(link)


_HANDLERS: dict[str, Callable[[_Walker, Node, Env], None]] = {
    "command": _Walker._command,
    "variable_assignment": _Walker._assignment,
    "declaration_command": _Walker._declaration,
    "function_definition": _Walker._function,
    "pipeline": _Walker._pipeline,
    "redirected_statement": _Walker._redirected,
    "subshell": _Walker._subshell,
    "command_substitution": _Walker._subshell,
    "process_substitution": _Walker._subshell,
    "for_statement": _Walker._for,
    "comment": _Walker._ignore,
    "compound_statement": _Walker._arithmetic,
    "c_style_for_statement": _Walker._arithmetic,
    "test_command": _Walker._test,
    "unset_command": _Walker._unset,
    "ERROR": _Walker._error,
}

__all__ = [
    "MAX_COMMANDS",
    "MAX_DEPTH",
    "MAX_PIPE_NAMES",
    "ParsedScript",
    "Redirect",
    "SimpleCommand",
    "parse_script",
]
