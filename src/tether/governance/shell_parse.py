"""Parse a shell script with tree-sitter-bash into flat SimpleCommand records.

Every simple command the script could run becomes one record, wherever it sits:
pipelines, lists, subshells, functions, loops, ``$(...)``, backticks, process
substitutions, here-docs fed to shells, ``bash -c`` / ``eval`` strings (parsed
recursively) and wrappers (``sudo``, ``env``, ``xargs``...; both the wrapper
and the wrapped command get a record). Words are unquoted and joined the way
the shell would; anything only known at run time is marked with ``DYNAMIC``.
The walk is deliberately over-inclusive: a command that might not run is still
reported, because governance must judge what *could* happen.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

from tree_sitter import Node

from tether.governance.carried_scripts import (
    mounted_paths,
    written_files,
)
from tether.governance.context import AnalysisContext
from tether.governance.makefiles import MAKES, variable_value_scripts
from tether.governance.paths import DYNAMIC, brace_words
from tether.governance.rules import in_command_set
from tether.governance.shell_assignments import Assignments
from tether.governance.shell_chain import Link, stdin_executors, unwrap_chain
from tether.governance.shell_embedded import EmbeddedScripts
from tether.governance.shell_expansion import (
    brace_expanded,
    name_expands,
    nonempty,
)
from tether.governance.shell_files import FileTracking
from tether.governance.shell_records import (
    READ_OPS,
    WRITE_OPS,
    Redirect,
    SimpleCommand,
    stdout_literal,
)
from tether.governance.shell_walk_core import (
    MAX_BOUND_LOOPS,
    MAX_CALLS,
    MAX_COMMANDS,
    MAX_DEPTH,
    MAX_LOOP_VALUES,
    MAX_PIPE_NAMES,
    SOURCE_CHARS,
    Env,
    Source,
    find_substitutions,
    has_expansion,
    joined,
    node_text,
)
from tether.governance.shell_words import (
    UNKNOWN_VARIABLE,
)
from tether.governance.wrappers import (
    code_arg_indices,
    download_outputs,
    executes_stdin,
    find_writes,
)

_REDIRECT_OPS = WRITE_OPS | READ_OPS | {">&-", "<&-"}


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


@dataclass
class _Redirections:
    redirects: list[Redirect] = field(default_factory=list)
    stdin_literal: str | None = None
    subs: list[Node] = field(default_factory=list)
    # Process substitutions the command reads as stdin (< <(x)) or writes into (> >(x)).
    feeds: list[Node] = field(default_factory=list)
    sinks: list[Node] = field(default_factory=list)
    extra_stages: list[Node] = field(default_factory=list)
    trailing: list[Node] = field(default_factory=list)
    # Input descriptors opened (3< <(x), < file), copied (<&3, < /dev/fd/3; the source
    # "-" closes, DYNAMIC is unknown) and given a literal (3<<EOF), by number.
    inputs: list[tuple[str, Node | str]] = field(default_factory=list)
    copies: list[tuple[str, str]] = field(default_factory=list)
    literals: list[tuple[str, str]] = field(default_factory=list)


# Children of a command node that are not its name, words, assignments or redirections.
_COMMAND_EXTRAS = frozenset({"subshell", "compound_statement", "ERROR"})


class _Walker(FileTracking, EmbeddedScripts, Assignments):
    """The whole walk: the core's state and moves, and each kind of node read."""

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

    def _is_descriptor(self, node: Node) -> bool:
        """Whether a number the grammar took for a word is the descriptor of the
        redirection glued to it: ``bash 0< <(curl x)`` comes as a command ``bash 0``."""
        end = node.end_byte
        return (
            node.type == "number"
            and bool(self.sources)
            and self.sources[-1][end : end + 1] in (b"<", b">")
        )

    def _descriptor_of(self, node: Node, default: str) -> str:
        """The descriptor a redirection node opens (``3<``, or a number the grammar left
        in the command before it, see ``_is_descriptor``), else ``default``."""
        number = next((c for c in node.children if c.type == "file_descriptor"), None)
        if number is not None:
            return node_text(number)
        source = self.sources[-1] if self.sources else b""
        match = re.search(rb"(?:^|[\s;&|(])(\d+)$", source[: node.start_byte])
        return match.group(1).decode() if match else default

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

    def _pipeline(self, node: Node, env: Env) -> None:
        self.run_pipeline([(stage, env) for stage in node.named_children])

    def run_pipeline(self, stages: list[tuple[Node, Env]]) -> None:
        """Walk pipeline stages, then tell each stage what consumes its output."""
        ranges: list[tuple[int, int]] = []
        piped = len(stages) > 1
        for stage, stage_env in stages:
            start = len(self.out)
            saved = self._save()  # every stage runs in its own subshell
            if ranges:  # its stdin is what the stage before it writes
                upstream = tuple(range(*ranges[-1]))
                stage_env = dataclasses.replace(stage_env, stdin_records=upstream)
            self.walk(stage, dataclasses.replace(stage_env, in_pipe=stage_env.in_pipe or piped))
            self._restore(saved)
            ranges.append((start, len(self.out)))
        downstream: tuple[str | None, ...] = ()
        executors: tuple[str | None, ...] = ()
        for start, end in reversed(ranges):
            self._tag(start, end, downstream, executors)
            records = self.out[start:end]
            downstream = joined(tuple(r.name for r in records), downstream)
            stdin_runners = (r for r in records if executes_stdin(r.name, r.args, r.stdin_args))
            executors = joined(tuple(r.name for r in stdin_runners), executors)
            if len(downstream) > MAX_PIPE_NAMES:
                self.too_wide = True
                return
        self._feed_literals(ranges)

    def _feed_literals(self, ranges: list[tuple[int, int]]) -> None:
        """``echo 'rm -rf /' | sh`` and ``echo / | xargs rm -rf``: use the literal text."""
        for (prev_start, prev_end), (start, end) in itertools.pairwise(ranges):
            literal = stdout_literal(self.out[prev_start:prev_end])
            if literal is None:
                continue
            for k in range(start, end):
                rec = self.out[k]
                if rec.stdin_args:
                    self.out[k] = dataclasses.replace(rec, args=_splice(rec.args, literal.split()))
                else:
                    self.run_stdin(rec.name, rec.args, literal, rec.source)

    def _redirected(self, node: Node, env: Env) -> None:
        body = node.child_by_field_name("body")
        info = self._redirections(node.children_by_field_name("redirect"))
        first = len(self.out)
        for sub in info.subs:
            self.walk_substitution(sub, (), ())
        feeds = self._walk_feeds(info.feeds)
        source = self._stdin_source(info, feeds, range(first, len(self.out)), [])
        body_env = self._redirected_env(env, info, source)
        if info.extra_stages and body is not None:
            # tree-sitter-bash nests `cat <<EOF | sh` as a pipeline inside the
            # here-doc redirect; rebuild the real pipeline.
            plain = dataclasses.replace(env, stdin_literal=None)
            self.run_pipeline([(body, body_env), *((s, plain) for s in info.extra_stages)])
        elif body is not None:
            start = len(self.out)
            self.walk(body, body_env)
            self._fed(feeds, source, start, len(self.out))
            self._sinks(info.sinks, start, len(self.out))
            self._open_descriptors(info, feeds, start, len(self.out))
        elif info.redirects:
            # `> file` with no command still truncates or creates the file.
            self.out.append(
                SimpleCommand(
                    ":", (), body_env.redirects, source=node_text(node)[:SOURCE_CHARS], cwd=self.cwd
                )
            )
        for extra in info.trailing:
            self.walk(extra, env)

    def _redirections(self, nodes: Iterable[Node]) -> _Redirections:
        info = _Redirections()
        for node in nodes:
            self._add_redirection(node, info)
        return info

    def _add_redirection(self, node: Node, info: _Redirections) -> None:
        if node.type == "file_redirect":
            self._add_file_redirect(node, info)
        elif node.type == "herestring_redirect":
            for child in node.named_children:
                if child.type == "file_descriptor":
                    continue
                value, subs = self.word(child)
                info.subs.extend(subs)
                info.stdin_literal = value + "\n"
                info.literals.append((self._descriptor_of(node, "0"), info.stdin_literal))
        elif node.type == "heredoc_redirect":
            self._add_heredoc(node, info)
        else:
            info.trailing.append(node)

    def _add_file_redirect(self, node: Node, info: _Redirections) -> None:
        op = next((c.type for c in node.children if c.type in _REDIRECT_OPS), ">")
        fd = self._descriptor_of(node, "0" if op in READ_OPS else "1")
        for dest in node.children_by_field_name("destination"):
            target, subs = self.word(dest)
            if dest.type == "process_substitution":
                (info.sinks if op in WRITE_OPS else info.feeds).append(dest)
                if op in ("<", "<>"):
                    info.inputs.append((fd, dest))
            else:
                info.subs.extend(subs)
                copied = _descriptor_path(target)
                if op in ("<", "<>"):  # < /dev/fd/3 reads descriptor 3
                    info.inputs.append((fd, target)) if copied is None else info.copies.append(
                        (fd, copied)
                    )
            is_fd_dup = op in (">&", "<&") and (target.isdigit() or target == "-")
            if op == "<&" and (is_fd_dup or DYNAMIC in target):
                info.copies.append((fd, target if is_fd_dup else DYNAMIC))
            if not is_fd_dup:
                info.redirects.append(Redirect(op, target))
        if op == "<&-":
            info.copies.append((fd, "-"))
        if any(c.type == "ERROR" for c in node.children):
            self.syntax_error = True

    def _add_heredoc(self, node: Node, info: _Redirections) -> None:
        for child in node.named_children:
            if child.type == "heredoc_body":
                info.stdin_literal = node_text(child)
                info.literals.append((self._descriptor_of(node, "0"), info.stdin_literal))
                info.subs.extend(find_substitutions(child))
            elif child.type in ("heredoc_start", "heredoc_end"):
                continue
            elif child.type == "pipeline":
                info.extra_stages.extend(child.named_children)
            elif child.type.endswith("_redirect"):
                self._add_redirection(child, info)
            else:
                info.trailing.append(child)

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
        read_fds = [fd for link in chain for a in link.args if (fd := _descriptor_path(a))]
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

    def _walk_feeds(self, feeds: list[Node]) -> list[tuple[Node, int, int]]:
        """Walk the process substitutions a command reads from (``< <(curl x)``) before
        the command, as bash starts them first: each with the range of its records."""
        walked = []
        for sub in feeds:
            first = len(self.out)
            self.walk_substitution(sub, (), ())
            walked.append((sub, first, len(self.out)))
        return walked

    def _stdin_source(
        self,
        info: _Redirections,
        feeds: list[tuple[Node, int, int]],
        substituted: range,
        read_fds: list[str],
    ) -> Source | None:
        """Where a command's input comes from, as its redirections say: process
        substitutions, a file downloaded or written earlier (``< f``), a descriptor
        opened earlier (``<&3``, ``< /dev/fd/3``, ``bash /dev/fd/3``), the output of
        the substitutions in its here-string; else the script's stdin once a bare
        ``exec`` redirected it. None when nothing is known of it."""
        records = [k for _sub, first, end in feeds for k in range(first, end)]
        records += list(substituted)
        literal: str | None = None
        unknown = False
        for _fd, target in info.inputs:
            resolved = self._resolve(target) if isinstance(target, str) else None
            records += self.downloads.get(resolved or "", [])
            literal = self.written.get(resolved or "", literal)
        own_stdin = any(fd == "0" for fd, _t in info.inputs) or info.stdin_literal is not None
        copied = [source for fd, source in info.copies if fd == "0"] + read_fds
        if not own_stdin and not copied and "0" in self.descriptors:
            copied = ["0"]
        for number in copied:
            if number == DYNAMIC:
                unknown = True
                continue
            opened = self.descriptors.get(number)
            if opened is not None:
                records += opened.records
                literal = opened.literal if opened.literal is not None else literal
                unknown = unknown or opened.unknown
        if not records and literal is None and not unknown:
            return None
        return Source(tuple(dict.fromkeys(records)), literal, unknown)

    @staticmethod
    def _redirected_env(env: Env, info: _Redirections, source: Source | None) -> Env:
        literal = info.stdin_literal if info.stdin_literal is not None else env.stdin_literal
        if literal is None and source is not None:
            literal = source.literal  # bash < f, bash <&3: the text written or opened
        return dataclasses.replace(
            env,
            redirects=env.redirects + tuple(info.redirects),
            stdin_literal=literal,
            stdin_records=source.records if source is not None else env.stdin_records,
        )

    def _fed(
        self, feeds: list[tuple[Node, int, int]], source: Source | None, start: int, end: int
    ) -> None:
        """Tell the records that fed the commands ``start:end`` their input what those
        do with it, as a pipe would (``sh < <(curl x)``: the download is run); a literal
        a process substitution prints is read as the script its reader runs. A reader
        that runs what an unknown descriptor gives it runs what only run time knows."""
        records = self.out[start:end]
        names = tuple(r.name for r in records)
        runners = tuple(r.name for r in records if executes_stdin(r.name, r.args, r.stdin_args))
        for _sub, first, last in feeds:
            literal = stdout_literal(self.out[first:last])
            for rec in records if literal is not None else ():
                self.run_stdin(rec.name, rec.args, cast(str, literal), rec.source)
        for k in source.records if source is not None else ():
            self._tag(k, k + 1, names, runners)
        if source is not None and source.unknown and runners:
            self.out.append(SimpleCommand(None, (), source=records[0].source, cwd=self.cwd))

    def _sinks(self, sinks: list[Node], start: int, end: int) -> None:
        """Walk the process substitutions the records ``start:end`` write into
        (``curl x > >(sh)``, ``curl -o >(sh) x``) and tag the writers with what they
        feed."""
        for sub in sinks:
            first = len(self.out)
            self.walk_substitution(sub, (), ())
            sink = self.out[first:]
            self._tag(
                start,
                end,
                tuple(r.name for r in sink),
                tuple(r.name for r in sink if executes_stdin(r.name, r.args, r.stdin_args)),
            )

    def _open_descriptors(
        self, info: _Redirections, feeds: list[tuple[Node, int, int]], start: int, end: int
    ) -> None:
        """A bare ``exec`` (``exec 3< <(curl x)``, ``exec < f``, ``exec 3<&0``) opens
        descriptors for the commands after it: remember where each reads from."""
        bare = end - start == 1 and self.out[start].name == "exec"
        if not bare or not all(re.fullmatch(r"\{\w+\}", a) for a in self.out[start].args):
            return
        named = bool(self.out[start].args)  # exec {fd}< <(x): the number is only known later
        ranges = {id(sub): range(first, last) for sub, first, last in feeds}
        for fd, target in info.inputs:
            if isinstance(target, str):
                resolved = self._resolve(target) or ""
                opened = Source(tuple(self.downloads.get(resolved, [])), self.written.get(resolved))
            else:
                opened = Source(tuple(ranges.get(id(target), ())))
            self.descriptors[DYNAMIC if named else fd] = opened
        for fd, text in info.literals:
            self.descriptors[fd] = Source(literal=text)
        for fd, number in info.copies:
            if number == "-":
                self.descriptors.pop(fd, None)
            elif number == DYNAMIC:
                self.descriptors[fd] = Source(unknown=True)
            elif number in self.descriptors:
                self.descriptors[fd] = self.descriptors[number]

    def _walk_word_substitutions(self, chain: list[Link], subs: list[list[Node]]) -> list[Node]:
        """Walk substitutions in the command's words, knowing which ones are run as code.
        Returns the ``>(...)`` ones, which the command may write into: they are walked
        once its records are made (see ``_feeds_and_sinks``)."""
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


def _descriptor_path(path: str) -> str | None:
    """The descriptor a path reads (``/dev/fd/3``, ``/proc/self/fd/3``, ``/dev/stdin``),
    or None."""
    if path == "/dev/stdin":
        return "0"
    match = re.fullmatch(r"/dev/fd/(\d+)|/proc/self/fd/(\d+)", path)
    return (match.group(1) or match.group(2)) if match else None


def _splice(args: tuple[str, ...], items: list[str]) -> tuple[str, ...]:
    """Replace xargs' DYNAMIC stdin placeholders with the literal items."""
    result: list[str] = []
    for arg in args:
        if arg == DYNAMIC:
            result.extend(items)
        else:
            result.append(arg.replace(DYNAMIC, items[0] if items else ""))
    return tuple(result)


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
