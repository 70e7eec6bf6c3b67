"""Console programs whose own commands reach the shell: gdb and lldb (``shell``,
``!``, ``run``), sqlite3 (``.shell``, ``.system``, ``.output |cmd``), psql (``\\!``,
``\\o |cmd``, ``COPY ... PROGRAM``), mysql (``\\!``, ``system``, ``pager``), dc
(``!``), ed (``!cmd``, ``r !cmd``, ``w !cmd``), sftp, ftp and lftp (``!cmd``), tmux
and screen (a command to run, keys to type). Their commands come on the command line
(``gdb -ex``, ``sqlite3 db '.shell x'``, ``psql -c``), from a file or from stdin; each
reader returns the shell command lines they run, DYNAMIC where what runs is only known
at run time (``python`` in gdb, ``.load`` in sqlite3). Like carried_scripts, this is
parsing knowledge: what is dangerous lives in the rule file.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from tether.governance.paths import DYNAMIC
from tether.governance.shell_words import is_option

# ---------------------------------------------------------------- the languages

# gdb: shell cmd, !cmd, pipe ... | cmd, run/start ARGS (the program, through a shell);
# python, guile, compile, an exec-wrapper, a target through a pipe: code or commands
# known at run time.
_GDB_SHELL = re.compile(r"^\s*(?:(?:platform\s+)?shell\b|!)\s*(.*)$")
_GDB_PIPE = re.compile(r"^\s*(?:pipe\b|\|)[^|]*\|\s*(.*)$")
_GDB_RUN = re.compile(r"^\s*(?:run|r|start|starti)\b\s*(.*)$")
_GDB_UNKNOWN = re.compile(
    r"^\s*(?:python|py|pi|python-interactive|guile|gu|compile|script|command\s+script"
    r"|set\s+exec-wrapper|target\s+(?:extended-)?remote\s*\||platform\s+shell\b)"
)
_GDB_CALL = re.compile(r"^\s*(?:call|print|p|output)\b.*\b(?:system|popen|exec\w*)\s*\(")


def debugger_scripts(text: str, program: str | None) -> list[str]:
    """Command lines gdb (or lldb) commands run; ``run ARGS`` runs ``program ARGS``."""
    found: list[str] = []
    for line in text.split("\n"):
        if (match := _GDB_SHELL.match(line)) or (match := _GDB_PIPE.match(line)):
            found.append(match.group(1))
        elif match := _GDB_RUN.match(line):
            found.append(f"{program or DYNAMIC} {match.group(1)}".strip())
        elif _GDB_UNKNOWN.match(line) or _GDB_CALL.match(line):
            found.append(DYNAMIC)
    return found


# sqlite3: .shell / .system cmd; .once / .output / .import / .read with |cmd.
_SQLITE_SHELL = re.compile(r"^\s*\.(?:shell|system)\s+(.*)$")
_SQLITE_PIPE = re.compile(
    r"""^\s*\.(?:once|output|import|read|excel)\s+(?:-\S+\s+)*['"]?\|(.*?)['"]?(?:\s+\w+)?\s*$"""
)
_SQLITE_UNKNOWN = re.compile(r"^\s*\.load\b|\bload_extension\s*\(|\bedit\s*\(", re.IGNORECASE)


def sqlite_scripts(text: str) -> list[str]:
    """Command lines sqlite3's dot-commands and SQL run."""
    found: list[str] = []
    for line in text.split("\n"):
        if (match := _SQLITE_SHELL.match(line)) or (match := _SQLITE_PIPE.match(line)):
            found.append(match.group(1))
        elif _SQLITE_UNKNOWN.search(line):
            found.append(DYNAMIC)
    return found


# psql: \! cmd; \o, \g, \w with |cmd; COPY / \copy ... PROGRAM 'cmd'.
_PSQL_SHELL = re.compile(r"\\!\s*(.*)$")
_PSQL_PIPE = re.compile(r"\\(?:o|out|g|gx|w|write)\s*\|\s*(.*)$")
_PSQL_PROGRAM = re.compile(r"\bprogram\s+'((?:[^']|'')*)'", re.IGNORECASE)


def psql_scripts(text: str) -> list[str]:
    """Command lines psql's meta-commands and COPY ... PROGRAM run."""
    found: list[str] = []
    for line in text.split("\n"):
        if (match := _PSQL_SHELL.search(line)) or (match := _PSQL_PIPE.search(line)):
            found.append(match.group(1))
        found += [m.group(1).replace("''", "'") for m in _PSQL_PROGRAM.finditer(line)]
    return found


# mysql: \! cmd, system cmd, pager cmd, \P cmd.
_MYSQL_SHELL = re.compile(r"^\s*(?:\\!|system\s|\\P|pager\s)\s*(.*)$", re.IGNORECASE)


def mysql_scripts(text: str) -> list[str]:
    """Command lines mysql's client commands run."""
    return [m.group(1) for line in text.split("\n") if (m := _MYSQL_SHELL.match(line))]


# dc: ! runs the rest of the line (!<, !>, != compare).
_DC_SHELL = re.compile(r"!(?![<>=])(.*)$", re.MULTILINE)


def dc_scripts(text: str) -> list[str]:
    """Command lines a dc program runs."""
    return [match.group(1) for match in _DC_SHELL.finditer(text)]


# ed: [addr]!cmd, [addr]r !cmd, [addr]w !cmd, e !cmd; g/re/cmds; a, i, c take text.
_ED_ADDRESS = re.compile(r"(?:[\s\d.$,;+\-^%]|'[a-z]|/(?:[^/\\\n]|\\.)*/|\?(?:[^?\\\n]|\\.)*\?)*")
_ED_SHELL = re.compile(r"^(?:[rwWeE]\s*)?!(.*)$")


def ed_scripts(text: str) -> list[str]:
    """Command lines ed commands run."""
    found: list[str] = []
    in_text = False
    for line in text.split("\n"):
        if in_text:
            in_text = line != "."
            continue
        command = line[_ED_ADDRESS.match(line).end() :]  # type: ignore[union-attr]
        if global_match := re.match(r"^[gGvV](.)(?:(?!\1).|\\.)*\1(.*)$", command):
            command = global_match.group(2)
        if match := _ED_SHELL.match(command):
            found.append(match.group(1))
        in_text = command in ("a", "i", "c")
    return found


def bang_scripts(text: str) -> list[str]:
    """Command lines sftp, ftp and lftp run: ``!cmd`` lines; a lone ``!`` starts a
    shell that reads the lines after it."""
    found: list[str] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped == "!":
            found.append("\n".join(lines[i + 1 :]))
            break
        if stripped.startswith("!"):
            found.append(stripped[1:])
    return found


_LANGUAGES = {
    "sqlite": sqlite_scripts,
    "psql": psql_scripts,
    "mysql": mysql_scripts,
    "dc": dc_scripts,
    "ed": ed_scripts,
    "bang": bang_scripts,
}


def console_program_scripts(language: str, text: str) -> list[str] | None:
    """Command lines ``text`` run in a console program's ``language`` runs; None for a
    language not known here."""
    reader = _LANGUAGES.get(language)
    if reader is not None:
        return reader(text)
    if language.startswith("gdb:"):
        return debugger_scripts(text, language[4:] or None)
    return None


# ---------------------------------------------------------------- command lines

_SQLITES = frozenset({"sqlite3", "sqlite"})
_SQLITE_VALUES = frozenset(
    {"-cmd", "-init", "-separator", "-newline", "-nullvalue", "-vfs", "-maxsize", "-mmap"}
    | {"-A", "-pagecache", "-lookaside", "-heap", "-escape"}
)
_PSQL_VALUES = frozenset(
    {"-d", "--dbname", "-h", "--host", "-p", "--port", "-U", "--username", "-v", "--set"}
    | {"--variable", "-o", "--output", "-L", "--log-file", "-P", "--pset", "-F", "-R", "-T"}
)
_MYSQL_VALUES = frozenset({"-h", "-u", "-P", "-S", "-D", "--host", "--user", "--port"})
_GDBS = frozenset({"gdb", "gdb-multiarch", "lldb", "cgdb"})
_GDB_VALUES = frozenset({"-p", "--pid", "-c", "--core", "-d", "--directory", "-cd", "-D"})
_BANGS = frozenset({"sftp", "ftp", "lftp", "ncftp", "tnftp", "pftp"})


def console_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines a console program runs from its command line: ``gdb -ex CMD``,
    ``lldb -o CMD``, ``sqlite3 db 'SQL' -cmd CMD``, ``psql -c CMD``, ``mysql -e CMD``,
    ``dc -e EXPR``, ``lftp -c CMDS``, a tmux or screen command."""
    if name in _GDBS:
        program = debugged_program(name, args)
        values = _values(args, {"-ex", "-iex", "--eval-command", "--init-eval-command"})
        values += _values(args, {"-o", "--one-line", "-O", "--one-line-before-file"})
        return [s for v in values for s in debugger_scripts(v, program)]
    if name in _SQLITES:
        words = _positionals(args, _SQLITE_VALUES)
        commands = _values(args, {"-cmd"}) + words[1:]
        return [s for c in commands for s in sqlite_scripts(c)]
    if name == "psql":
        return [s for c in _values(args, {"-c", "--command"}) for s in psql_scripts(c)]
    if name in ("mysql", "mariadb"):
        return [s for c in _values(args, {"-e", "--execute"}) for s in mysql_scripts(c)]
    if name == "dc":
        return [s for c in _values(args, {"-e", "--expression"}) for s in dc_scripts(c)]
    if name == "lftp":
        return [s for c in _values(args, {"-c", "-e"}) for s in bang_scripts(c.replace(";", "\n"))]
    if name == "tmux":
        return tmux_scripts(args)
    if name == "screen":  # the command it starts is unwrapped (see wrappers)
        return screen_scripts(args)
    return []


def console_programs(name: str, args: Sequence[str]) -> list[tuple[str, int | None]]:
    """(language, index of the file argument, None for stdin) for each program a
    console program reads: ``gdb -x file`` and stdin, ``sqlite3 -init file`` and stdin
    (with no SQL on the command line), ``psql -f file`` or stdin, ``mysql`` stdin,
    ``dc`` files or stdin, ``ed`` stdin, ``sftp -b file`` or stdin."""
    if name in _GDBS:
        language = "gdb:" + (debugged_program(name, args) or "")
        files = _value_indices(args, {"-x", "--command", "-ix", "--init-command", "-s", "-S"})
        return [(language, i) for i in files] + [(language, None)]
    if name in _SQLITES:
        inits = [("sqlite", i) for i in _value_indices(args, {"-init"})]
        stdin = len(_positionals(args, _SQLITE_VALUES)) <= 1
        return inits + ([("sqlite", None)] if stdin else [])
    if name == "psql":
        files = _value_indices(args, {"-f", "--file"})
        commands = _values(args, {"-c", "--command"})
        return [("psql", i) for i in files] + ([] if files or commands else [("psql", None)])
    if name in ("mysql", "mariadb"):
        return [] if _values(args, {"-e", "--execute"}) else [("mysql", None)]
    if name == "dc":
        files = _value_indices(args, {"-f", "--file"})
        files += [i for i, a in enumerate(args) if not is_option(a) and i - 1 not in files]
        return [("dc", i) for i in files] + ([] if _values(args, {"-e"}) else [("dc", None)])
    if name == "ed":
        return [("ed", None)]
    if name in _BANGS:
        batch = _value_indices(args, {"-b", "-f"})
        return [("bang", i) for i in batch] + [("bang", None)]
    return []


def debugged_program(name: str, args: Sequence[str]) -> str | None:
    """The program gdb or lldb runs: its first argument that is no option."""
    words = _positionals(args, _GDB_VALUES | {"-ex", "-iex", "-x", "-o", "-O", "-s", "-S"})
    return words[0] if words else None


def debugger_invocation(name: str, args: Sequence[str]) -> int | None:
    """Where the command gdb or lldb runs starts: after ``--args`` or lldb's ``--``."""
    if name not in _GDBS:
        return None
    for marker in ("--args", "--"):
        if marker in args and args.index(marker) + 1 < len(args):
            return args.index(marker) + 1
    return None


def _values(args: Sequence[str], options: set[str] | frozenset[str]) -> list[str]:
    return [args[i] if i < len(args) else "" for i in _value_indices(args, options)]


def _value_indices(args: Sequence[str], options: set[str] | frozenset[str]) -> list[int]:
    """Indices of the values of ``options`` (``-o V``, ``--opt=V``, ``-oV``)."""
    found = []
    for i, arg in enumerate(args):
        attached = not arg.startswith("--") and arg[:2] in options and len(arg) > 2
        if arg in options and i + 1 < len(args):
            found.append(i + 1)
        elif ("=" in arg and arg.split("=", 1)[0] in options) or attached:
            found.append(i)
    return found


def _positionals(args: Sequence[str], values: frozenset[str]) -> list[str]:
    words = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in values:
            skip = True
        elif not is_option(arg):
            words.append(arg)
    return words


# ---------------------------------------------------------------- tmux and screen

# tmux commands that run a shell command given as their last words, and their options
# taking a value.
_TMUX_RUNNERS = frozenset(
    {"new-session", "new", "new-window", "neww", "split-window", "splitw", "respawn-pane"}
    | {"respawnp", "respawn-window", "respawnw", "run-shell", "run", "pipe-pane", "pipep"}
    | {"display-popup", "popup", "if-shell", "if"}
)
_TMUX_VALUES = frozenset(
    {"-c", "-e", "-F", "-n", "-s", "-t", "-x", "-y", "-f", "-l", "-p", "-d", "-T", "-w"}
    | {"-h", "-b", "-S", "-L", "-C"}
)
_TMUX_FLAGS = frozenset({"-d", "-P", "-A", "-D", "-E", "-X", "-k", "-a", "-b", "-h", "-v", "-I"})
_TMUX_ENTER = frozenset({"Enter", "C-m", "C-j", "KPEnter"})


def tmux_scripts(args: Sequence[str]) -> list[str]:
    """Command lines a tmux command line runs: the shell command of new-session,
    new-window, split-window, run-shell, if-shell...; the keys send-keys types (as a
    command line); ``tmux -c CMD``. Commands are joined by ``;``."""
    found: list[str] = []
    if "-c" in args[:1]:
        return [args[1]] if len(args) > 1 else []
    command: list[str] = []
    for arg in [*args, ";"]:
        if arg in (";", "\\;"):
            found += _tmux_command(command)
            command = []
        else:
            command.append(arg)
    return found


def _tmux_command(words: list[str]) -> list[str]:
    i = 0
    while i < len(words) and is_option(words[i]):  # tmux's own options
        i += 2 if words[i] in ("-L", "-S", "-f", "-T") else 1
    if i >= len(words):
        return []
    name, rest = words[i], words[i + 1 :]
    if name in ("send-keys", "send"):
        keys = [w for w in _tmux_positionals(rest) if w not in _TMUX_ENTER]
        return [" ".join(keys)] if keys else []
    if name not in _TMUX_RUNNERS:
        return []
    positionals = _tmux_positionals(rest)
    if len(positionals) > 1:  # several words: run as they are, without a shell
        return [shlex.join(positionals)]
    return positionals


def _tmux_positionals(words: list[str]) -> list[str]:
    found: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if found or not is_option(word):
            found.append(word)
        elif word not in _TMUX_FLAGS and word in _TMUX_VALUES:
            i += 1
        i += 1
    return found


def screen_scripts(args: Sequence[str]) -> list[str]:
    """Command lines screen types into a window: the text of ``-X stuff``."""
    if "-X" not in args:
        return []
    rest = list(args[args.index("-X") + 1 :])
    if rest[:1] == ["stuff"] and len(rest) > 1:
        return [rest[1].replace("\\n", "\n").replace("\\r", "\n")]
    return []
