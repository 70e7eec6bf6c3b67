"""Where a command's input comes from and where its output goes: pipelines,
redirections and here-docs, process substitutions read (``< <(curl x)``) or written
into (``> >(sh)``), and descriptors a bare ``exec`` opens for later commands. The
records upstream are told what their output flows into (``curl x | sh``: the download
is run), and literal text fed to a command is read as what it runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

from tree_sitter import Node

from tether.governance.paths import DYNAMIC
from tether.governance.shell_embedded import EmbeddedScripts
from tether.governance.shell_expansion import WordExpansion
from tether.governance.shell_files import FileTracking
from tether.governance.shell_records import (
    READ_OPS,
    WRITE_OPS,
    Redirect,
    SimpleCommand,
    stdout_literal,
)
from tether.governance.shell_walk_core import (
    MAX_PIPE_NAMES,
    SOURCE_CHARS,
    Env,
    Source,
    find_substitutions,
    joined,
    node_text,
)
from tether.governance.wrappers import executes_stdin

_REDIRECT_OPS = WRITE_OPS | READ_OPS | {">&-", "<&-"}


@dataclass
class _RedirectInfo:
    """What a command's redirections say, as the walk reads them."""

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


class Redirections(WordExpansion, FileTracking, EmbeddedScripts):
    """Pipelines, redirections and descriptors: what feeds each command, and what its
    output feeds."""

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

    def _redirections(self, nodes: Iterable[Node]) -> _RedirectInfo:
        info = _RedirectInfo()
        for node in nodes:
            self._add_redirection(node, info)
        return info

    def _add_redirection(self, node: Node, info: _RedirectInfo) -> None:
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

    def _add_file_redirect(self, node: Node, info: _RedirectInfo) -> None:
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
                copied = descriptor_path(target)
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

    def _add_heredoc(self, node: Node, info: _RedirectInfo) -> None:
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
        info: _RedirectInfo,
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
    def _redirected_env(env: Env, info: _RedirectInfo, source: Source | None) -> Env:
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
        self, info: _RedirectInfo, feeds: list[tuple[Node, int, int]], start: int, end: int
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


def descriptor_path(path: str) -> str | None:
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
