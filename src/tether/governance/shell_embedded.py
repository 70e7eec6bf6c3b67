"""The scripts a command carries and the walk reads as scripts of their own:
``bash -c``, ``eval``, ``ssh host cmd``, awk and sed programs, interpreter code
(``python -c``, ``python <<EOF``), and the paths such code names in its literals.
"""

from __future__ import annotations

import posixpath
from typing import cast

from tether.governance.carried_scripts import (
    awk_scripts,
    code_scripts,
    option_scripts,
    path_literals,
    program_scripts,
    programs_read,
    sed_scripts,
)
from tether.governance.rules import in_command_set
from tether.governance.shell_chain import Link
from tether.governance.shell_records import SimpleCommand
from tether.governance.shell_walk_core import Env, WalkerCore
from tether.governance.wrappers import (
    SCHEDULERS,
    executes_stdin,
    inline_code,
    remote_script_of,
    script_of,
    shell_c_arguments,
)

# Commands whose arguments hold code or SQL that may name files (see _code_paths).
_CODE_ARGUMENTS = frozenset(
    {"sqlite3", "sqlite", "psql", "mysql", "mariadb", "awk", "gawk", "mawk", "nawk"}
)
# Languages read as scripts in full (their paths are words the walk judges).
_SCRIPT_LANGUAGES = frozenset({"sh", "make", "ex", "keys", "sed"})


class EmbeddedScripts(WalkerCore):
    """Walking the scripts and code a command carries in its words or its stdin."""

    def _embedded_scripts(self, link: Link, env: Env, source: str) -> None:
        """Parse the scripts a command carries: bash -c, eval, ssh, python -c "os.system(...)"."""
        name = cast(str, link.name)
        script = script_of(name, link.args)
        if script is not None:
            outer = self.positional  # sh -c 'rm $1' _ x: $1 is x there
            arguments = shell_c_arguments(link.args) if in_command_set(name, "shells") else None
            self.positional = arguments if arguments is not None else outer
            self.nested_script(script, Env(), source)
            self.positional = outer
        carried_scripts = (
            option_scripts(name, link.args)
            + awk_scripts(name, link.args)
            + sed_scripts(name, link.args)
        )
        for carried in carried_scripts:
            self.nested_script(carried, Env(), source)
        remote = remote_script_of(name, link.args)
        if remote is not None:
            saved = self._save()
            self.cwd = None  # relative paths on the remote host are unknown here
            self.nested_script(remote, Env(), source)
            self._restore(saved)
        code = inline_code(name, link.args)
        for embedded in code_scripts(name, code) if code is not None else ():
            self.nested_script(embedded, Env(), source)
        if code is not None or name in _CODE_ARGUMENTS:  # python -c, sqlite3 db 'SQL', awk
            self._code_paths(name, code if code is not None else "\n".join(link.args), source)
        if env.stdin_literal is not None:
            self.run_stdin(name, link.args, env.stdin_literal, source)

    def _code_paths(self, name: str, code: str, source: str) -> None:
        """The paths interpreter code or SQL names in string literals (``open('/home/u/
        .tether/token')``, ``ATTACH '...'``) are judged as the command's arguments, in a
        record of their own; so is a literal naming Tether's state directory from the
        home (``Path.home() / '.tether'``)."""
        tether = str(self.ctx.tether_home)
        base, home = posixpath.basename(tether), str(self.ctx.home)
        from_home = posixpath.dirname(tether) == home
        paths = []
        for literal in path_literals(code):
            if literal.startswith(("/", "~/")):
                paths.append(literal)
            elif from_home and (literal == base or literal.startswith(base + "/")):
                paths.append(f"{home}/{literal}")
        if paths:
            self.out.append(SimpleCommand(name, tuple(paths), source=source, cwd=self.cwd))

    def run_stdin(self, name: str | None, args: tuple[str, ...], text: str, source: str) -> None:
        """Parse what ``name args...`` runs when ``text`` is its stdin: a shell's script
        (``bash <<< 'cmd'``), an interpreter's code (``python <<EOF``), or a program in
        a carried language (``make -f - <<< 'all:; cmd'``, ``vim -es <<< '!cmd'``)."""
        language = _stdin_language(name, args)
        for script in program_scripts(language, text) if language is not None else ():
            self.nested_script(script, Env(), source)
        if language is not None and name is not None and language not in _SCRIPT_LANGUAGES:
            self._code_paths(name, text, source)


def _stdin_language(name: str | None, args: tuple[str, ...]) -> str | None:
    """The language in which ``name args...`` runs its stdin ("sh" for a shell's
    script, an interpreter's name for its code, a carried language: "make", "ex"...);
    None when it does not run it."""
    if name is None or not executes_stdin(name, args):
        return None
    stdin_programs = [p.language for p in programs_read(name, args) if p.index is None]
    if stdin_programs:
        return stdin_programs[0]
    return "sh" if _runs_shell_stdin(name, args) else name


def _runs_shell_stdin(name: str | None, args: tuple[str, ...]) -> bool:
    """True if the command runs its stdin as a *shell* script (python stdin is not shell)."""
    if name is None or not executes_stdin(name, args):
        return False
    return name in ("source", ".") or name in SCHEDULERS or in_command_set(name, "shells")
