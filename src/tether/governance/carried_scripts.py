"""Command lines carried where the parser sees only words: in options (``env -S``,
``flock -c``, ``rsync -e``, ``tar --to-command``, ``ssh -o ProxyCommand=``, a git alias
``!cmd`` or command-valued key), in variables programs run (``GIT_SSH_COMMAND``,
``PAGER``, ``LESSOPEN``), in awk programs (``system("cmd")``, pipes) and in GNU sed
scripts (``e cmd``, ``s///e``). Each is parsed as the script it is (see shell_parse);
like wrappers.py, this is parsing knowledge, and what is dangerous lives in the rule
file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tether.governance.paths import DYNAMIC
from tether.governance.shell_words import is_assignment, is_option, positional_args, subcommand
from tether.governance.wrappers import STRING_LITERAL

# Options whose value a command runs as a shell command line (through sh -c, or split
# into words much as the shell would).
_SCRIPT_OPTIONS: dict[str, tuple[str, ...]] = {
    "env": ("-S", "--split-string"),
    "flock": ("-c", "--command"),
    "script": ("-c", "--command"),
    "rsync": ("-e", "--rsh"),
    "tar": (
        "-I",
        "--use-compress-program",
        "--to-command",
        "--rsh-command",
        "-F",
        "--info-script",
        "--new-volume-script",
    ),
    "zip": ("-TT", "--unzip-command"),
}
# git configuration keys (their last part, lower case) whose value git runs as a
# shell command line; an alias runs one when its value starts with "!".
_GIT_VALUE_OPTIONS = ("-C", "-c", "--git-dir", "--work-tree", "--namespace")
_GIT_COMMAND_KEYS = frozenset(
    {"sshcommand", "pager", "editor", "askpass", "fsmonitor", "external", "textconv"}
    | {"clean", "smudge", "process", "driver", "command", "program", "helper", "cmd"}
)
# Environment variables whose value programs run as a command line (git, ssh, less,
# man, editors).
_COMMAND_VARIABLES = frozenset(
    {"GIT_SSH_COMMAND", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS"}
    | {"GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "SSH_ASKPASS", "PAGER", "MANPAGER"}
    | {"EDITOR", "VISUAL", "LESSOPEN", "LESSCLOSE", "SYSTEMD_PAGER", "BROWSER"}
)


def option_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines that ``name args...`` runs from its options: ``env -S``,
    ``flock -c``, ``rsync -e``, ``tar --to-command`` or ``--checkpoint-action=exec=``,
    ``zip -TT``, ``ssh -o ProxyCommand=``, ``git -c alias.x='!cmd'`` (or ``git config``
    storing such a value, to run later), and the command-valued ``VAR=cmd`` words
    ``env`` sets."""
    scripts = _option_values(args, _SCRIPT_OPTIONS.get(name, ()))
    if name == "env":
        scripts += [s for a in args if is_assignment(a) for s in [variable_script(a)] if s]
        for i, arg in enumerate(args):  # env -S 'cmd a' b: b is one more word of cmd
            after = i + 2 if arg == "-S" or arg == "--split-string" else i + 1
            if arg.startswith(("-S", "--split-string")) and scripts and after < len(args):
                scripts[0] = " ".join([scripts[0], *args[after:]])
                break
    elif name == "tar":
        scripts += [
            a.split("=", 1)[1][len("exec=") :]
            for a in args
            if a.startswith("--checkpoint-action=") and a.split("=", 1)[1].startswith("exec=")
        ]
    elif name in ("ssh", "scp", "sftp"):
        scripts += _ssh_command_options(args)
    elif name == "git":
        scripts += _git_command_values(args)
    return scripts


def _option_values(args: Sequence[str], names: Sequence[str]) -> list[str]:
    """Every value given to one of the options ``names`` (``-c V``, ``-qc V``,
    ``--long=V``)."""
    values = []
    for i, arg in enumerate(args):
        cluster = not arg.startswith("--") and len(arg) > 2 and "-" + arg[-1] in names
        if (arg in names or cluster) and i + 1 < len(args):  # -c V, -qc V
            values.append(args[i + 1])
        elif arg.startswith("--") and arg.split("=", 1)[0] in names and "=" in arg:
            values.append(arg.split("=", 1)[1])
    return values


def variable_script(assignment: str) -> str | None:
    """The command line in ``VAR=value`` when programs run VAR's value
    (``GIT_SSH_COMMAND='cmd'``, ``LESSOPEN='|cmd %s'``)."""
    var, _, value = assignment.partition("=")
    if var not in _COMMAND_VARIABLES or not value:
        return None
    return value.lstrip("|") if var.startswith("LESS") else value


def _ssh_command_options(args: Sequence[str]) -> list[str]:
    found = []
    for i, arg in enumerate(args):
        if arg == "-o" and i + 1 < len(args):
            option = args[i + 1]
        elif arg.startswith("-o") and len(arg) > 2:
            option = arg[2:]
        else:
            continue
        key, _, value = option.replace("=", " ", 1).partition(" ")
        if key.lower() in ("proxycommand", "localcommand") and value.strip():
            found.append(value)
    return found


def _git_command_values(args: Sequence[str]) -> list[str]:
    """Values of git configuration keys that git runs as command lines: given with
    ``-c key=value`` or stored by ``git config [options] key value``."""
    pairs: list[tuple[str, str]] = []
    for i, arg in enumerate(args):
        if arg == "-c" and i + 1 < len(args):
            key, _, value = args[i + 1].partition("=")
            pairs.append((key, value))
    if subcommand(args, _GIT_VALUE_OPTIONS) == "config":
        words = positional_args(args[args.index("config") + 1 :])
        if len(words) >= 2:
            pairs.append((words[0], words[1]))
    found = []
    for key, value in pairs:
        section, _, last = key.lower().rpartition(".")
        if value.startswith("!"):
            found.append(value[1:])
        elif last in _GIT_COMMAND_KEYS and section and not section.startswith("alias"):
            found.append(value)
    return found


_AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_AWK_VALUES = frozenset({"-v", "-F", "--assign", "--field-separator", "-W", "-l", "--load"})
_AWK_FILES = frozenset({"-f", "--file", "-E", "--exec", "-i", "--include"})
# system("...") with one string literal for its argument; anything else is computed.
_AWK_LITERAL_SYSTEM = re.compile(r'system\s*\(\s*"(?:[^"\\]|\\.)*"\s*\)')
_AWK_SYSTEM = re.compile(r"system\s*\(")
# A pipe to or from a command ("cmd" | getline, print | "cmd"); "||" is a logical or.
_AWK_PIPE = re.compile(r"(?<!\|)\|(?!\|)")


def awk_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines an awk program on the command line runs (``system("cmd")``,
    ``print | "cmd"``, ``"cmd" | getline``); DYNAMIC for a ``system()`` whose command
    is computed (``system($0)``: the input run as commands)."""
    if name not in _AWKS:
        return []
    program = None
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg in _AWK_FILES or arg.startswith(("-f", "--file=")):
            return []  # the program is in a file
        elif arg in _AWK_VALUES:
            skip = True
        elif arg == "--" or not is_option(arg):
            program = args[i + 1] if arg == "--" and i + 1 < len(args) else arg
            break
    if program is None:
        return []
    found = []
    if _AWK_SYSTEM.search(program) or _AWK_PIPE.search(program):
        found = [
            next(g for g in m.groups() if g is not None)
            for m in STRING_LITERAL.finditer(program)
            if m.group(2) is not None
        ]
    if len(_AWK_SYSTEM.findall(program)) > len(_AWK_LITERAL_SYSTEM.findall(program)):
        found.append(DYNAMIC)
    return found


_SEDS = frozenset({"sed", "gsed"})
_SED_SCRIPTS = ("-e", "--expression")
# An address: a line number, $, or /regex/ (\cREGEXc is left out: rare, and it only
# makes this see no e command, never a wrong one).
_SED_ADDRESS = r"(?:\d+(?:~\d+)?|\$|/(?:[^/\\\n]|\\.)*/[IM]*)"
# GNU sed's e command: "e cmd" runs cmd, a bare "e" runs the pattern space.
_SED_E_COMMAND = re.compile(
    rf"(?:^|[;\n{{}}])\s*(?:{_SED_ADDRESS}(?:\s*,\s*{_SED_ADDRESS})?)?\s*!?\s*"
    r"e(?:[ \t]+([^;\n}]*))?\s*(?=$|[;\n}])"
)
# s/regex/replacement/flags with the e flag: the pattern space, once replaced, is run.
_SED_S_WITH_E = re.compile(
    r"(?:^|[;\n{}!]|[\d$/])\s*s([^\w\s\\\n])(?:(?!\1)[^\\\n]|\\.)*\1"
    r"(?:(?!\1)[^\\\n]|\\.)*\1[gpiImM0-9]*e"
)


def sed_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines GNU sed runs from its script: the ``e cmd`` command's, and DYNAMIC
    for a bare ``e`` or an ``s///e`` (the edited input is run as a command line)."""
    if name not in _SEDS:
        return []
    scripts = [args[i + 1] for i, a in enumerate(args[:-1]) if a in _SED_SCRIPTS] + [
        a.split("=", 1)[1] for a in args if a.startswith("--expression=")
    ]
    if any(a in ("-f", "--file") or a.startswith("--file=") for a in args):
        return []  # (part of) the script is in a file
    if not scripts:
        words = positional_args(args)
        scripts = words[:1]
    found: list[str] = []
    for script in scripts:
        for match in _SED_E_COMMAND.finditer(script):
            found.append(match.group(1).strip() if match.group(1) else DYNAMIC)
        if _SED_S_WITH_E.search(script):
            found.append(DYNAMIC)
    return found
