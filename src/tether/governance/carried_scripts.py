"""Command lines carried where the parser sees only words: in options (``env -S``,
``flock -c``, ``rsync -e``, ``tar --to-command``, ``ssh -o ProxyCommand=``, a git alias
``!cmd`` or command-valued key), in variables programs run (``GIT_SSH_COMMAND``,
``PAGER``, ``LESSOPEN``, ``VIMINIT``, ``MAKEFLAGS``), in awk programs (``system("cmd")``,
pipes), in GNU sed scripts (``e cmd``, ``s///e``), in vim's ex commands (``-c '!cmd'``,
ex_commands.py), in makefiles and make's variables (makefiles.py), in Tcl (``exec``)
and in the string literals of interpreter code that shells out. Each is parsed as the
script it is (see shell_parse); like wrappers.py, this is parsing knowledge, and what
is dangerous lives in the rule file.

A program in one of these languages may also come from a file or stdin rather than the
command line (``make -f -``, ``vim -es``, ``awk -f prog``): :func:`programs_read` says
where a command reads one, :func:`program_scripts` what running its text runs.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from tether.governance.console_commands import (
    console_program_scripts,
    console_programs,
    console_scripts,
)
from tether.governance.ex_commands import (
    VIMS,
    BufferCommand,
    ex_command_scripts,
    ex_scripts,
    key_scripts,
    less_command_scripts,
    less_scripts,
    vim_ex_mode,
    vim_file_indices,
    vim_program_files,
    vim_reads_text,
    vim_scripts,
)
from tether.governance.makefiles import (
    MAKES,
    make_scripts,
    makefile_indices,
    makefile_names,
    makefile_scripts,
    variable_value_scripts,
)
from tether.governance.paths import DYNAMIC
from tether.governance.rules import in_command_set
from tether.governance.shell_words import (
    UNKNOWN_VARIABLE,
    is_assignment,
    is_option,
    positional_args,
    subcommand,
)

#: Files that are the command's stdin when named as a program to read.
STDIN_FILES = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})

# Options whose value a command runs as a shell command line (through sh -c, or split
# into words much as the shell would).
_SCRIPT_OPTIONS: dict[str, tuple[str, ...]] = {
    "env": ("-S", "--split-string"),
    "flock": ("-c", "--command"),
    "script": ("-c", "--command"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "scp": ("-S",),
    "sftp": ("-S", "-D"),
    "tar": (
        "-I",
        "--use-compress-program",
        "--to-command",
        "--rsh-command",
        "-F",
        "--info-script",
        "--new-volume-script",
        "--rmt-command",
    ),
    "zip": ("-TT", "--unzip-command"),
    "svn": ("--diff-cmd", "--diff3-cmd", "--editor-cmd"),
    "hg": ("--ssh", "-e", "--remotecmd"),
    "man": ("-P", "--pager", "-H", "--html"),
}
# git configuration keys (their last part, lower case) whose value git runs as a
# shell command line; an alias runs one when its value starts with "!".
_GIT_VALUE_OPTIONS = ("-C", "-c", "--git-dir", "--work-tree", "--namespace")
_GIT_COMMAND_KEYS = frozenset(
    {"sshcommand", "pager", "editor", "askpass", "fsmonitor", "external", "textconv"}
    | {"clean", "smudge", "process", "driver", "command", "program", "helper", "cmd"}
    | {"gitproxy", "difffilter", "receivepack", "uploadpack"}
)
# ... and any whose last part ends so (alternateRefsCommand, packObjectsHook, toCmd);
# pager.<command> holds the pager of that command.
_GIT_COMMAND_SUFFIXES = ("command", "cmd", "hook", "program")
_GIT_COMMAND_SECTIONS = frozenset({"pager"})
# Options whose value git runs as a command line (on this machine for a local
# repository): fetch/clone/ls-remote --upload-pack, push --receive-pack, archive --exec;
# clone's -u.
_GIT_COMMAND_OPTIONS = ("--upload-pack", "--receive-pack", "--exec")
# Environment variables whose value programs run as a command line (git, ssh, less,
# man, editors). Others carry options or programs in a language of their own (see
# variable_scripts).
_COMMAND_VARIABLES = frozenset(
    {"GIT_SSH_COMMAND", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS"}
    | {"GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "SSH_ASKPASS", "PAGER", "MANPAGER"}
    | {"EDITOR", "VISUAL", "LESSOPEN", "LESSCLOSE", "SYSTEMD_PAGER", "BROWSER", "GIT_SSH"}
    | {"PSQL_PAGER", "MYSQL_PS1", "SUDO_ASKPASS", "RSYNC_RSH", "CVS_RSH", "RSYNC_CONNECT_PROG"}
    | {"PROMPT_COMMAND", "FCEDIT", "SUDO_EDITOR", "SYSTEMD_EDITOR", "SVN_EDITOR", "HGEDITOR"}
)
# Environment variables holding options an interpreter takes as code (NODE_OPTIONS
# --import=data:..., PERL5OPT -M...): read as interpreter code is.
_CODE_VARIABLES = frozenset(
    {
        "NODE_OPTIONS",
        "PERL5OPT",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
    }
)


def option_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines that ``name args...`` runs from its options: ``env -S``,
    ``flock -c``, ``rsync -e``, ``tar --to-command`` or ``--checkpoint-action=exec=``,
    ``zip -TT``, ``man -P``, ``ssh -o ProxyCommand=``, ``git -c alias.x='!cmd'`` (or
    ``git config`` storing such a value, to run later), vim's ``-c`` / ``+`` commands,
    less's ``+`` commands, make's ``--eval`` and variables, and the ``VAR=value`` words
    ``env`` sets that carry command lines (for make, any variable)."""
    scripts = _option_values(args, _SCRIPT_OPTIONS.get(name, ()))
    scripts += vim_scripts(name, args) + less_scripts(name, args) + make_scripts(name, args)
    scripts += console_scripts(name, args)
    if name == "env":
        assignments = [a for a in args if is_assignment(a)]
        scripts += [s for a in assignments for s in variable_scripts(a)]
        if any(w in MAKES for w in (a.rsplit("/", 1)[-1] for a in positional_args(args))):
            scripts += [s for a in assignments for s in variable_value_scripts(a)]
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
    elif name in ("apt", "apt-get", "aptitude", "apt-cache"):
        # -o DPkg::Pre-Invoke::=cmd, APT::Update::Post-Invoke-Success::=cmd
        options = _option_values(args, ("-o", "--option"))
        scripts += [o.split("=", 1)[1] for o in options if "invoke" in o.split("=", 1)[0].lower()]
    elif name == "socat":  # socat - SYSTEM:'cmd', EXEC:'prog args'
        programs = [a for a in args if a.lower().startswith(("system:", "exec:"))]
        scripts += [a.split(":", 1)[1].split(",", 1)[0] for a in programs]
    elif name == "dpkg":
        scripts += _option_values(args, ("--pre-invoke", "--post-invoke"))
    elif name in ("npm", "npx", "pnpm", "pnpx", "yarn", "bunx"):
        scripts += _package_manager_scripts(name, args)
    elif name == "git":
        scripts += _git_command_values(args) + _git_subcommand_scripts(args)
    elif name == "hg":
        scripts += _hg_config_scripts(args)
    return scripts


def _package_manager_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines npm and its kind run: ``npx -c CMD``, ``npm exec -c CMD``, the
    scripts ``npm pkg set scripts.x=CMD`` and ``npm set-script x CMD`` store (run by
    ``npm run x`` later), a ``--script-shell``."""
    found = _option_values(args, ("--script-shell",))
    words = positional_args(args)
    if name in ("npx", "pnpx", "bunx") or (words[:1] and words[0] in ("exec", "x")):
        found += _option_values(args, ("-c", "--call"))
    if words[:2] == ["pkg", "set"]:
        found += [w.split("=", 1)[1] for w in words[2:] if w.startswith("scripts.") and "=" in w]
    if words[:1] == ["set-script"] and len(words) > 2:
        found.append(words[2])
    if words[:3] == ["config", "set", "script-shell"] and len(words) > 3:
        found.append(words[3])
    return found


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


def variable_scripts(assignment: str) -> list[str]:
    """The command lines in ``VAR=value`` when programs run VAR's value
    (``GIT_SSH_COMMAND='cmd'``, ``LESSOPEN='|cmd %s'``), read it as ex commands
    (``VIMINIT``, ``EXINIT``), as options carrying commands (``LESS='+!cmd'``,
    ``MANOPT='-P cmd'``, ``MAKEFLAGS='--eval=...'``) or as git configuration
    (``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_VALUE_<n>``)."""
    var, _, value = assignment.partition("=")
    if not value:
        return []
    if var in _COMMAND_VARIABLES:
        return [value.lstrip("|") if var.startswith("LESS") else value]
    if var in ("VIMINIT", "EXINIT"):
        return ex_command_scripts(value)
    if var in _CODE_VARIABLES:
        return shell_strings_in_code(value)
    if var == "LESS":
        return [s for part in value.split("+")[1:] for s in less_command_scripts(part)]
    if var in ("MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKEFILES"):
        return variable_value_scripts(assignment)
    if var == "MANOPT":
        return option_scripts("man", _split_words(value))
    if var == "GIT_CONFIG_PARAMETERS":
        return _git_command_values([w for p in _split_words(value) for w in ("-c", p)])
    if re.fullmatch(r"GIT_CONFIG_VALUE_\d+", var):
        return [value[1:] if value.startswith("!") else value]
    return []


def _split_words(value: str) -> list[str]:
    """``value`` split into words as a shell would; unknown if it does not split."""
    try:
        return shlex.split(value)
    except ValueError:
        return [DYNAMIC]


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
    found = _git_pair_scripts(pairs)
    found += _option_values(args, _GIT_COMMAND_OPTIONS)
    if subcommand(args, _GIT_VALUE_OPTIONS) == "clone":
        found += _option_values(args[args.index("clone") + 1 :], ("-u",))
    found += [_ext_command(a[len("ext::") :]) for a in args if a.startswith("ext::")]
    return found


def _git_pair_scripts(pairs: list[tuple[str, str]]) -> list[str]:
    """The command lines of git configuration pairs: an alias ``!cmd``, a key whose
    value git runs."""
    found = []
    for key, value in pairs:
        section, _, last = key.lower().rpartition(".")
        named = last in _GIT_COMMAND_KEYS or last.endswith(_GIT_COMMAND_SUFFIXES)
        by_key = section and not section.startswith("alias") and named
        if value.startswith("!"):
            found.append(value[1:])
        elif by_key or section.split(".")[0] in _GIT_COMMAND_SECTIONS:
            found.append(value)
    return found


_GIT_SECTION = re.compile(r'\[\s*([^\]\s"]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')


def git_config_scripts(text: str) -> list[str]:
    """Command lines a git configuration file (``.git/config``, ``~/.gitconfig``)
    makes git run: its aliases ``!cmd`` and command-valued keys."""
    pairs: list[tuple[str, str]] = []
    section = ""
    for raw in text.split("\n"):
        line = raw.strip()
        header = _GIT_SECTION.match(line)
        if header:
            section = header.group(1) + (f".{header.group(2)}" if header.group(2) else "")
            line = line[header.end() :].strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) > 1 and value[0] == value[-1] == '"':
            value = value[1:-1]
        pairs.append((f"{section}.{key.strip()}", value))
    return _git_pair_scripts(pairs)


def package_scripts(text: str) -> list[str]:
    """The scripts a ``package.json`` holds (npm test, npm install... run them)."""
    try:
        document = json.loads(text)
    except ValueError:
        return [DYNAMIC] if '"scripts"' in text else []
    scripts = document.get("scripts") if isinstance(document, dict) else None
    if not isinstance(scripts, dict):
        return []
    return [value for value in scripts.values() if isinstance(value, str)]


# Options of git subcommands whose value is a command line: rebase --exec, difftool
# --extcmd, grep --open-files-in-pager, send-email's commands, filter-branch's filters.
_GIT_SUBCOMMAND_OPTIONS = {
    "rebase": ("-x", "--exec"),
    "difftool": ("-x", "--extcmd"),
    "grep": ("-O", "--open-files-in-pager"),
    "send-email": ("--to-cmd", "--cc-cmd", "--sendmail-cmd", "--smtp-server"),
    "filter-branch": (
        *("--env-filter", "--tree-filter", "--index-filter", "--parent-filter"),
        *("--msg-filter", "--commit-filter", "--tag-name-filter"),
    ),
    "mergetool": ("--tool-cmd",),
}


def _git_subcommand_scripts(args: Sequence[str]) -> list[str]:
    """Command lines git subcommands take: ``rebase -x CMD``, ``submodule foreach
    CMD``, ``filter-branch --tree-filter CMD``, ``difftool -x CMD``..."""
    sub = subcommand(args, _GIT_VALUE_OPTIONS)
    if sub is None:
        return []
    rest = args[args.index(sub) + 1 :]
    found = _option_values(rest, _GIT_SUBCOMMAND_OPTIONS.get(sub, ()))
    words = positional_args(rest)
    if sub == "submodule" and words[:1] == ["foreach"]:
        found.append(" ".join(words[1:]))
    return found


def _hg_config_scripts(args: Sequence[str]) -> list[str]:
    """Mercurial's ``--config KEY=VALUE``: an alias ``!cmd``, a hook, an editor, merge
    tool or pager command; an extension loads code from a path."""
    found = []
    for value in _option_values(args, ("--config",)):
        key, _, setting = value.partition("=")
        section = key.split(".", 1)[0].lower()
        if setting.startswith("!"):
            found.append(setting[1:])
        elif section in ("hooks", "pager") or key.lower() in ("ui.editor", "ui.merge", "ui.ssh"):
            found.append(setting)
        elif section == "extensions" and setting:
            found.append(DYNAMIC)
    return found


def _ext_command(text: str) -> str:
    """The command of git's ``ext::`` transport: words split at spaces, ``% `` a space
    within a word, ``%%`` a percent sign."""
    words = text.replace("%%", "\x01").replace("% ", "\x02").split(" ")
    return " ".join(shlex.quote(w.replace("\x02", " ").replace("\x01", "%")) for w in words if w)


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
            return []  # the program is in a file (see programs_read)
        elif arg in _AWK_VALUES:
            skip = True
        elif arg == "--" or not is_option(arg):
            program = args[i + 1] if arg == "--" and i + 1 < len(args) else arg
            break
    if program is None:
        return []
    return awk_program_scripts(program)


def awk_program_scripts(program: str) -> list[str]:
    """Command lines an awk program runs (see :func:`awk_scripts`)."""
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
    return [found for script in scripts for found in sed_program_scripts(script)]


def sed_program_scripts(script: str) -> list[str]:
    """Command lines a sed script runs (see :func:`sed_scripts`)."""
    found: list[str] = []
    for match in _SED_E_COMMAND.finditer(script):
        found.append(match.group(1).strip() if match.group(1) else DYNAMIC)
    if _SED_S_WITH_E.search(script):
        found.append(DYNAMIC)
    return found


# ---------------------------------------------------------------- programs read

# Options naming a file awk or sed reads its program from.
_AWK_PROGRAM_FILES = frozenset({"-f", "--file", "-E", "--exec", "-i", "--include"})
_SED_PROGRAM_FILES = frozenset({"-f", "--file"})


@dataclass(frozen=True)
class Program:
    """A program a command reads, in ``language``, from the file its argument at
    ``index`` names, or from its stdin (``index`` None)."""

    language: str
    index: int | None = None


def programs_read(name: str, args: Sequence[str]) -> list[Program]:
    """Where ``name args...`` reads a program in a carried language: ``make -f FILE``
    (a makefile), vim's ``-S`` / ``-u`` files (ex commands), ``awk -f`` and ``sed -f``
    files; and stdin for ``make -f -``, vim in ex mode (ex commands) or reading keys
    (no ``-``: its stdin is typed), ``awk -f -``; the console programs' (gdb, sqlite3,
    psql, ed, sftp...: see console_commands). A file named ``-`` or ``/dev/stdin`` is
    the stdin."""
    programs: list[Program]
    if name in MAKES:
        programs = [Program("make", i) for i in makefile_indices(args)]
    elif name in VIMS:
        programs = [Program(language, i) for i, language in vim_program_files(name, args)]
        if not vim_reads_text(args):
            programs.append(Program("ex" if vim_ex_mode(name, args) else "keys"))
        if _runs_buffer(vim_scripts(name, args)):  # vim -c '%!sh' file: the file is run
            programs += [Program("sh", i) for i in vim_file_indices(name, args)]
            if vim_reads_text(args):
                programs.append(Program("sh"))
    elif name in _AWKS:
        programs = [Program("awk", i) for i in _file_option_indices(args, _AWK_PROGRAM_FILES)]
    elif name in _SEDS:
        programs = [Program("sed", i) for i in _file_option_indices(args, _SED_PROGRAM_FILES)]
    else:  # gdb, sqlite3, psql, mysql, dc, ed, sftp...
        programs = [Program(language, i) for language, i in console_programs(name, args)]
    return [
        Program(p.language) if p.index is not None and value_at(args, p.index) in STDIN_FILES else p
        for p in programs
    ]


def value_at(args: Sequence[str], index: int) -> str:
    """The value an option's word at ``index`` holds: the word itself, or what follows
    the option in it (``-fFILE``, ``--file=FILE``)."""
    word = args[index]
    if not word.startswith("-") or word in STDIN_FILES:
        return word
    return word.split("=", 1)[1] if word.startswith("--") else word[2:]


def _runs_buffer(scripts: list[str]) -> bool:
    """Whether vim feeds the text it edits to a shell or interpreter (``:w !sh``,
    ``:%!python3``), which then runs it."""
    for script in scripts:
        if isinstance(script, BufferCommand):
            words = _split_words(script)
            name = words[0].rsplit("/", 1)[-1] if words else DYNAMIC
            if DYNAMIC in name or in_command_set(name, "shells"):
                return True
            if in_command_set(name, "interpreters") or name in ("source", "."):
                return True
    return False


def program_file_names(name: str, args: Sequence[str]) -> list[tuple[str, str]]:
    """(file, language) for the files ``name args...`` reads as programs, make's
    default makefiles included (``make`` reads ./Makefile)."""
    found = [
        (value_at(args, p.index), p.language)
        for p in programs_read(name, args)
        if p.index is not None
    ]
    if name in MAKES and not makefile_indices(args):
        found += [(file, "make") for file in makefile_names(args)]
    return found


def _file_option_indices(args: Sequence[str], options: frozenset[str]) -> list[int]:
    """Indices of the words naming the values of ``options`` (``-f FILE``, ``-nf
    FILE``, ``--file=FILE``, ``-fFILE``)."""
    found = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        long_option = arg.startswith("--") and arg.split("=", 1)[0] in options
        if long_option and "=" in arg:
            found.append(i)
        elif (arg in options or re.fullmatch(r"-[nrsuzE]+f", arg)) and i + 1 < len(args):
            found.append(i + 1)
        elif not arg.startswith("--") and arg[:2] in options and len(arg) > 2:
            found.append(i)
    return found


def program_scripts(language: str, text: str) -> list[str]:
    """Command lines running ``text`` as a program in ``language`` runs ("sh": the text
    itself)."""
    if language == "sh":
        return [text]
    if language == "make":
        return makefile_scripts(text)
    if language == "ex":
        return ex_scripts(text)
    if language == "keys":
        return key_scripts(text)
    if language == "awk":
        return awk_program_scripts(text)
    if language == "sed":
        return sed_program_scripts(text)
    console = console_program_scripts(language, text)
    return console if console is not None else code_scripts(language, text)


# ---------------------------------------------------------------- interpreter code

# Calls through which interpreter code runs shell command strings.
_SHELL_OUT = re.compile(
    r"system|popen|subprocess|check_output|check_call|spawn|exec|shell_exec|passthru|`"
    r"|getoutput|proc_open|\bqx\b|%x|shell-command|call-process|start-process"
)
STRING_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"|`([^`]*)`", re.DOTALL)
# What joins two string literals into one string ('r' + 'm', "a" . "b", 'a' .. 'b',
# 'a' 'b'), and what makes them words of one command (a list or argument list:
# ['rm', '-rf'], 'rm', ['-rf', '/']).
_CONCATENATION = re.compile(r"\s*(?:\+|\.\.?)?\s*")
_NEXT_WORD = re.compile(r"\s*,\s*\[?\s*")
# Perl's qw(...) and Ruby's %w(...): a list of words; qx(...) and %x(...): a command.
_WORD_LIST = re.compile(r"(?:\bqw|%[wW])\s*([(\[{<])([^)\]}>]{0,4096})[)\]}>]")
_COMMAND_QUOTE = re.compile(r"(?:\bqx|%x)\s*([(\[{<])([^)\]}>]{0,4096})[)\]}>]")
#: Interpreters of Tcl, whose exec, spawn and open "|cmd" run commands given as words.
TCLS = frozenset({"tclsh", "wish", "expect", "expectk", "jimsh"})


# Code run from text the code decodes (exec(base64.b64decode(...)), os.system(chr(...)
# + ...)): what runs is only known at run time.
_RUNS_CODE = re.compile(r"\b(?:exec|eval|compile|system|popen|spawn\w*|run|call|Popen)\s*\(|`")
_DECODES = re.compile(
    r"b64decode|b32decode|a85decode|fromhex|unhexlify|decodebytes|\bchr\s*\(|fromCharCode"
    r"|codecs\.decode|zlib\.decompress|marshal\.loads|pickle\.loads|\brot13|unpack\s*\(|Buffer\.from"
    r"|atob\s*\(|\bpack\s*\(\s*['\"][Hh]"
)


def code_scripts(name: str, code: str) -> list[str]:
    """Command lines interpreter code may run: see :func:`shell_strings_in_code`; for
    Tcl also the words of ``exec``, ``spawn``, ``system`` and ``open "|cmd"``; DYNAMIC
    for code that runs what it decodes (exec(base64.b64decode(...)))."""
    found = shell_strings_in_code(code)
    if _RUNS_CODE.search(code) and _DECODES.search(code):
        found.append(DYNAMIC)
    if name in TCLS or re.match(r"tclsh|wish", name):
        found += tcl_scripts(code)
    return found


def shell_strings_in_code(code: str) -> list[str]:
    """String literals of interpreter code that shells out (``os.system('...')``).

    A heuristic, not a parser for every language: when the code mentions a
    shell-out call, each string literal in it is analysed as a shell script, and so
    are literals joined into one (``'r' + 'm -rf ~'``) and lists of literals taken as
    the words of one command (``subprocess.run(['rm', '-rf', '/'])``, ``qw(rm -rf /)``).
    """
    if not _SHELL_OUT.search(code):
        return []
    matches = list(STRING_LITERAL.finditer(code))
    found = [_literal(m) for m in matches]
    words: list[list[str]] = []  # the words of the list being read, each in pieces
    for i, match in enumerate(matches):
        gap = code[matches[i - 1].end() : match.start()] if i else None
        if gap is not None and _CONCATENATION.fullmatch(gap) and gap.strip(" \t"):
            words[-1].append(_literal(match))
            continue
        if gap is None or not _NEXT_WORD.fullmatch(gap):
            _flush(words, found)
            words = []
        words.append([_literal(match)])
    _flush(words, found)
    for match in _WORD_LIST.finditer(code):
        found.append(" ".join(shlex.quote(w) for w in match.group(2).split()))
    found += [match.group(2) for match in _COMMAND_QUOTE.finditer(code)]
    return found


def _literal(match: re.Match[str]) -> str:
    return next(g for g in match.groups() if g is not None)


def _flush(words: list[list[str]], found: list[str]) -> None:
    """Add what a list of literals makes: each joined word ('r' + 'm'), and the words
    of one command when there are several."""
    joined = ["".join(pieces) for pieces in words]
    found += [word for word, pieces in zip(joined, words, strict=True) if len(pieces) > 1]
    if len(joined) > 1:
        found.append(" ".join(shlex.quote(w) for w in joined))


# A Tcl command that runs a program: at the start of a command (line, ";", "[", "{").
_TCL_RUNNER = re.compile(r"(?:^|(?<=[\n;\[{]))\s*(exec|spawn|system|open)\b")
_TCL_VARIABLE = re.compile(r"\$(?:\{[^}]*\}|[A-Za-z0-9_:]+(?:\([^)]*\))?)")


def tcl_scripts(code: str) -> list[str]:
    """Command lines Tcl code runs: the words after ``exec`` (a program and its
    arguments, with |, < and > as a shell's), ``spawn`` and expect's ``system``, and
    an ``open`` of ``|cmd``. A ``[command]`` or ``$variable`` in them is only known at
    run time."""
    found = []
    for match in _TCL_RUNNER.finditer(code):
        words = _tcl_words(code, match.end())
        while words and words[0].startswith("-"):  # exec -ignorestderr --, spawn -noecho
            words = words[1:]
        if match.group(1) == "open":  # open "|cmd args" mode: only the first word
            if not words or not words[0].startswith("|"):
                continue
            words = [words[0][1:].strip()]
        if words:
            found.append(" ".join(words))
    return found


def _tcl_words(code: str, start: int) -> list[str]:
    """The words of one Tcl command from ``start`` on, as shell text: a braced word
    quoted, a substitution unknown."""
    words: list[str] = []
    i = start
    while i < len(code):
        char = code[i]
        if char in " \t":
            i += 1
            continue
        if char in "\n;]":
            break
        end = _tcl_word_end(code, i)
        word = code[i:end]
        if word.startswith("{") and word.endswith("}"):
            inner = word[1:-1]
            words.append(inner if inner.startswith("|") else shlex.quote(inner))
        else:
            if word.startswith('"') and word.endswith('"') and len(word) > 1:
                word = word[1:-1]
            word = _TCL_VARIABLE.sub(UNKNOWN_VARIABLE, word)
            word = re.sub(r"\[[^\]]*\]", UNKNOWN_VARIABLE, word)
            words.append(word)
        i = end
    return words


def _tcl_word_end(code: str, i: int) -> int:
    """Where the Tcl word starting at ``i`` ends: a braced, bracketed or quoted word at
    its closing character, a bare one at a blank, newline, ";" or "]"."""
    opening = code[i]
    if opening in "{[":
        closing = "}" if opening == "{" else "]"
        depth = 0
        j = i
        while j < len(code):
            char = code[j]
            if char == "\\":
                j += 2
                continue
            if char == opening:
                depth += 1
            elif char == closing:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return len(code)
    if opening == '"':
        j = i + 1
        while j < len(code) and code[j] != '"':
            j += 2 if code[j] == "\\" else 1
        return min(j + 1, len(code))
    j = i
    while j < len(code) and code[j] not in " \t\n;]":
        j = _tcl_word_end(code, j) if code[j] == "[" else j + (2 if code[j] == "\\" else 1)
    return min(j, len(code))


# ---------------------------------------------------------------- files and paths


def written_files(name: str, args: Sequence[str]) -> list[str]:
    """Files a command writes that no redirection shows: sed's ``w file`` and
    ``s///w file``, awk's ``print > "file"``, vim's ``:w file`` / ``:saveas file``."""
    if name in _SEDS:
        scripts = [args[i + 1] for i, a in enumerate(args[:-1]) if a in _SED_SCRIPTS]
        scripts = scripts or positional_args(args)[:1]
        return [(m.group(1) or m.group(3)).strip() for s in scripts for m in _SED_WRITE.finditer(s)]
    if name in _AWKS:
        return [m.group(1) for a in args for m in _AWK_WRITE.finditer(a)]
    if name in VIMS:
        commands = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-c", "--cmd")]
        commands += [a[1:] for a in args if a.startswith("+")]
        return [m.group(1) for c in commands for m in _EX_WRITE.finditer(c)]
    return []


# sed: w FILE (a command) or s/a/b/w FILE (a flag): the file name runs to the line's end.
_SED_WRITE = re.compile(
    rf"(?:^|[;\n{{}}])\s*(?:{_SED_ADDRESS}(?:\s*,\s*{_SED_ADDRESS})?)?\s*!?\s*w\s+([^\n]+)"
    r"|s([^\w\s\\\n])(?:(?!\2)[^\\\n]|\\.)*\2(?:(?!\2)[^\\\n]|\\.)*\2[gpiImMe0-9]*w\s+([^\n]+)"
)
_AWK_WRITE = re.compile(r'>>?\s*"([^"]+)"')
_EX_WRITE = re.compile(
    r"(?:^|\|)\s*:?\s*[%.$\d,]*\s*(?:w|wr|wri|writ|write|sav|saveas|wq|x|xit)!?(?:\s*>>)?\s+"
    r"([^\s|!][^\s|]*)"
)

_CONTAINERS = frozenset({"docker", "podman", "nerdctl"})


def mounted_paths(name: str | None, args: Sequence[str]) -> list[str]:
    """Host paths a container gets (``docker run -v /home/u:/h``, ``--mount
    type=bind,source=/``): judged as arguments of the command, for what the container
    may then do with them."""
    if name not in _CONTAINERS:
        return []
    found = []
    for i, arg in enumerate(args):
        value = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("-v", "--volume"):
            found.append(value.split(":", 1)[0])
        elif arg.startswith(("--volume=", "-v")) and len(arg) > 2 and arg != "--volume":
            found.append(
                arg.split("=", 1)[1].split(":", 1)[0] if "=" in arg else arg[2:].split(":", 1)[0]
            )
        elif arg == "--mount" or arg.startswith("--mount="):
            spec = value if arg == "--mount" else arg.split("=", 1)[1]
            fields = dict(f.split("=", 1) for f in spec.split(",") if "=" in f)
            found += [fields[k] for k in ("source", "src") if k in fields]
    return [p for p in found if p.startswith(("/", "~", "."))]


def path_literals(code: str) -> list[str]:
    """String literals of interpreter code or SQL that look like paths (``'/etc/x'``,
    ``'~/.ssh/id_rsa'``) or are single names (``'.tether'``, which the caller may
    judge): what the code may open is judged as the command's arguments."""
    return [
        literal
        for match in STRING_LITERAL.finditer(code)
        if (literal := _literal(match))
        and "\n" not in literal
        and len(literal) < 4096
        and (literal.startswith(("/", "~/")) or re.fullmatch(r"[\w.\-/]+", literal))
    ]
