"""Knowledge about commands that run other commands.

Wrappers (``sudo``, ``env``, ``timeout``, ``xargs``, ``find -exec``...) are
unwrapped to the command they start; script-taking commands (``bash -c``,
``eval``, ``su -c``, ``trap``, ``watch``) expose the script text so it can be
parsed recursively. This is parsing knowledge, so it lives in code; what is
*dangerous* lives in the rule file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tether.governance.carried_scripts import STDIN_FILES, programs_read
from tether.governance.console_commands import debugger_invocation
from tether.governance.paths import DYNAMIC
from tether.governance.rules import in_command_set
from tether.governance.shell_words import (
    flag_set,
    is_assignment,
    is_option,
    positional_args,
)


@dataclass(frozen=True)
class Invocation:
    """A command started by a wrapper.

    ``argv[0]`` is the command word; ``offset`` is the index in the wrapper's
    argument list where it starts (substitutions are mapped back through it);
    ``stdin_args`` means extra arguments arrive on stdin at run time (xargs).
    """

    argv: tuple[str, ...]
    offset: int
    stdin_args: bool = False


@dataclass(frozen=True)
class _Spec:
    value_options: frozenset[str] = frozenset()
    positionals_to_skip: int = 0
    skip_assignments: bool = False
    stdin_args: bool = False
    no_exec_flags: frozenset[str] = frozenset()


def _spec(
    *values: str,
    skip: int = 0,
    skip_assignments: bool = False,
    stdin_args: bool = False,
    no_exec_flags: frozenset[str] = frozenset(),
) -> _Spec:
    return _Spec(frozenset(values), skip, skip_assignments, stdin_args, no_exec_flags)


_TRACE_VALUES = ("-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-P", "-S", "-X")
_WRAPPERS: dict[str, _Spec] = {
    "env": _spec(
        "-u",
        "--unset",
        "-C",
        "--chdir",
        skip_assignments=True,
        # env -S 'cmd args': the string is split into the command (see option_scripts).
        no_exec_flags=frozenset({"-S", "--split-string"}),
    ),
    "nohup": _spec(),
    "setsid": _spec(),
    "time": _spec("-f", "--format", "-o", "--output"),
    "nice": _spec("-n", "--adjustment"),
    "ionice": _spec("-c", "--class", "-n", "--classdata"),
    "timeout": _spec("-s", "--signal", "-k", "--kill-after", skip=1),
    "stdbuf": _spec("-i", "-o", "-e", "--input", "--output", "--error"),
    "xargs": _spec(
        "-I",
        "-n",
        "-P",
        "-d",
        "-a",
        "-L",
        "-s",
        "-E",
        "--max-args",
        "--max-procs",
        "--delimiter",
        "--arg-file",
        "--max-lines",
        "--max-chars",
        "--eof",
        "--replace",
        "--process-slot-var",
        stdin_args=True,
    ),
    "sudo": _spec(
        "-u",
        "-g",
        "-C",
        "-D",
        "-h",
        "-p",
        "-r",
        "-t",
        "-T",
        "-U",
        "--user",
        "--group",
        "--chdir",
        "--host",
        "--prompt",
        "--role",
        "--type",
        "--other-user",
        "--close-from",
        "--command-timeout",
    ),
    "doas": _spec("-u", "-C"),
    "pkexec": _spec("--user"),
    "runuser": _spec("-u", "-g", "-G", "--user", "--group"),
    "command": _spec(no_exec_flags=frozenset({"-v", "-V"})),
    "builtin": _spec(),
    "exec": _spec("-a"),
    "chroot": _spec("--userspec", "--groups", skip=1),
    "taskset": _spec(skip=1),
    "flock": _spec("-w", "--timeout", "-E", "--conflict-exit-code", skip=1),
    "unbuffer": _spec(),
    "caffeinate": _spec("-t", "-w"),
    "fakeroot": _spec(),
    "proxychains": _spec("-f"),
    "proxychains4": _spec("-f"),
    "torsocks": _spec(),
    "strace": _spec(*_TRACE_VALUES),
    "ltrace": _spec(*_TRACE_VALUES),
    "busybox": _spec(),
    "toybox": _spec(),
    # Programs that run a command in a session, namespace, scope or under a tool.
    "systemd-run": _spec(
        *("-u", "--unit", "-p", "--property", "--description", "--slice", "-E", "--setenv"),
        *("--uid", "--gid", "-M", "--machine", "-H", "--host", "--working-directory"),
        *("--nice", "--on-active", "--on-boot", "--on-startup", "--on-unit-active"),
        *("--on-unit-inactive", "--on-calendar", "--timer-property", "--service-type"),
    ),
    "unshare": _spec("-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd"),
    "nsenter": _spec("-t", "--target", "-S", "--setuid", "-G", "--setgid"),
    "firejail": _spec(),
    "bwrap": _spec(
        *("--bind", "--ro-bind", "--dev-bind", "--symlink", "--setenv", "--chdir", "--tmpfs"),
        *("--proc", "--dev", "--dir", "--uid", "--gid", "--hostname", "--unsetenv"),
        no_exec_flags=frozenset({"--help", "--version"}),
    ),
    "chrt": _spec(skip=1, no_exec_flags=frozenset({"-p", "--pid", "-m", "--max"})),
    "numactl": _spec(
        *("-N", "--cpunodebind", "-m", "--membind", "-C", "--physcpubind", "-p"),
        *("--preferred", "-i", "--interleave"),
    ),
    "cgexec": _spec("-g"),
    "xvfb-run": _spec(
        *("-n", "--server-num", "-s", "--server-args", "-f", "--auth-file", "-e"),
        *("--error-file", "-p", "--xauth-protocol", "-w", "--wait"),
    ),
    "dbus-run-session": _spec("--config-file", "--dbus-daemon"),
    "dbus-launch": _spec("--config-file"),
    "ssh-agent": _spec("-a", "-E", "-t", "-P", "-O"),
    "faketime": _spec("-f", "-m", skip=1),
    "catchsegv": _spec(),
    "valgrind": _spec(),
    "screen": _spec("-S", "-c", "-e", "-h", "-p", "-t", "-T", "-s", "-Logfile"),
    "entr": _spec(no_exec_flags=frozenset({"-s"})),
    # "! ! cmd": bash takes only the first "!" as the reserved word; the grammar reads
    # the second as a command running the rest.
    "!": _spec(),
}
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_EXPRESSION_START = ("-", "(", "!", ")")


def unwrap(name: str, args: Sequence[str]) -> list[Invocation]:
    """Commands that ``name args...`` starts directly (empty if it is not a wrapper)."""
    if name == "find":
        return _find_exec(args)
    if name == "coproc":
        return _coproc(args)
    if name == "parallel":
        return _parallel(args)
    start = debugger_invocation(name, args)
    if start is not None:  # gdb --args prog a b, lldb -- prog a b: what runs
        return [Invocation(tuple(args[start:]), start)]
    start = _package_runner_start(name, args)
    if start is not None:  # npx cmd, npm exec -- cmd, pnpm dlx cmd: a package's command
        return [Invocation(tuple(args[start:]), start)]
    if name == "cmake":
        return _cmake_tool(args)
    if name == "ruby" and "-run" in args:
        return _ruby_un(args)
    if name == "git" and "bisect" in args and "run" in args:  # git bisect run cmd args
        start = args.index("run") + 1
        return [Invocation(tuple(args[start:]), start)] if start < len(args) else []
    spec = _WRAPPERS.get(name)
    if spec is None:
        return []
    start = _inner_start(args, spec)
    if start is None:
        return []
    argv = tuple(args[start:])
    if not spec.stdin_args:
        return [Invocation(argv, start)]
    return [Invocation(_xargs_argv(args[:start], argv), start, stdin_args=True)]


# Package managers' subcommands that run a command (a package's binary, fetched if
# need be): npm exec / x, pnpm exec / dlx, yarn exec / dlx, and npx, pnpx, bunx.
_PACKAGE_EXEC = {"npm": ("exec", "x"), "pnpm": ("exec", "dlx"), "yarn": ("exec", "dlx")}
_PACKAGE_RUNNERS = frozenset({"npx", "pnpx", "bunx"})
_PACKAGE_VALUES = frozenset(
    {"-p", "--package", "-w", "--workspace", "--prefix", "-C", "--dir", "-c", "--call"}
)


def _package_runner_start(name: str, args: Sequence[str]) -> int | None:
    i = 0
    if name in _PACKAGE_EXEC:
        sub = next((k for k, a in enumerate(args) if not is_option(a)), None)
        if sub is None or args[sub] not in _PACKAGE_EXEC[name]:
            return None
        i = sub + 1
    elif name not in _PACKAGE_RUNNERS:
        return None
    while i < len(args):
        if args[i] == "--":
            i += 1
            break
        if not is_option(args[i]):
            break
        i += 2 if args[i] in _PACKAGE_VALUES else 1
    return i if i < len(args) else None


# cmake -E's file commands, as the coreutils they stand for.
_CMAKE_TOOLS = {
    "rm": ("rm",),
    "remove": ("rm",),
    "remove_directory": ("rm", "-r"),
    "copy": ("cp",),
    "copy_directory": ("cp", "-r"),
    "copy_if_different": ("cp",),
    "rename": ("mv",),
    "make_directory": ("mkdir", "-p"),
    "touch": ("touch",),
    "create_symlink": ("ln", "-s"),
}


def _cmake_tool(args: Sequence[str]) -> list[Invocation]:
    """``cmake -E rm -rf x`` removes as rm does; ``cmake -E env``, ``chdir DIR`` and
    ``time`` run a command."""
    if "-E" not in args or args.index("-E") + 1 >= len(args):
        return []
    at = args.index("-E") + 1
    tool, rest = args[at], tuple(args[at + 1 :])
    if tool in _CMAKE_TOOLS:
        return [Invocation((*_CMAKE_TOOLS[tool], *rest), at)]
    if tool == "env":
        inner = _inner_start(rest, _spec("--unset", skip_assignments=True))
        return [Invocation(rest[inner:], at + 1 + inner)] if inner is not None else []
    if tool == "chdir" and len(rest) > 1:  # the directory: see working_directory
        return [Invocation(rest[1:], at + 2)]
    if tool == "time" and rest:
        return [Invocation(rest, at + 1)]
    return []


# ruby -run -e rm_rf -- files: un.rb's commands, as the coreutils they stand for.
_RUBY_UN = {
    "rm_rf": ("rm", "-rf"),
    "rm_r": ("rm", "-r"),
    "rm": ("rm",),
    "rmdir": ("rmdir",),
    "mv": ("mv",),
    "cp": ("cp",),
    "cp_r": ("cp", "-r"),
    "ln": ("ln",),
    "chmod": ("chmod",),
    "install": ("install",),
    "mkdir": ("mkdir",),
    "touch": ("touch",),
}


def _ruby_un(args: Sequence[str]) -> list[Invocation]:
    if "-e" not in args or args.index("-e") + 1 >= len(args):
        return []
    at = args.index("-e") + 1
    command = _RUBY_UN.get(args[at])
    if command is None:
        return []
    rest = [a for a in args[at + 1 :] if a != "--"]
    return [Invocation((*command, *rest), at)]


def _coproc(args: Sequence[str]) -> list[Invocation]:
    """``coproc [NAME] { cmd...; }`` or ``coproc cmd...``: the grammar does not know the
    keyword, so it reads a command ``coproc`` whose words are the group's first command
    (with the ``{`` and the name before it); the group's other commands come as their own."""
    skip = 0
    if args and args[0] == "{":
        skip = 1
    elif len(args) > 1 and args[1] == "{":
        skip = 2
    argv = tuple(args[skip:])
    return [Invocation(argv, skip)] if argv else []


# GNU parallel's options that take a value.
_PARALLEL_VALUES = frozenset(
    {"-j", "--jobs", "-S", "--sshlogin", "-a", "--arg-file", "-d", "--delimiter", "-I"}
    | {"-n", "--max-args", "-N", "--colsep", "-C", "--joblog", "--results", "--timeout"}
    | {"--retries", "--delay", "--tmpdir", "--workdir", "--wd", "-E", "--eof", "--env"}
)
_PARALLEL_INPUTS = frozenset({":::", "::::", ":::+", "::::+"})


def _parallel(args: Sequence[str]) -> list[Invocation]:
    """``parallel [options] cmd... ::: items``: the command once per item, each appended
    (as xargs does); with no ``:::`` the items arrive on stdin. Items from ``::::`` files
    or stdin are known only at run time."""
    i = 0
    while i < len(args) and is_option(args[i]) and args[i] not in _PARALLEL_INPUTS:
        i += 2 if args[i] in _PARALLEL_VALUES else 1
    end = next((k for k in range(i, len(args)) if args[k] in _PARALLEL_INPUTS), len(args))
    command = tuple(args[i:end])
    if not command:
        return []
    if end == len(args):
        return [Invocation(_xargs_argv(args[:i], command), i, stdin_args=True)]
    if args[end] != ":::":
        return [Invocation((*command, DYNAMIC), i)]
    items = [a for a in args[end + 1 :] if a not in _PARALLEL_INPUTS]
    return [Invocation(_with_item(command, item), i) for item in items] or [Invocation(command, i)]


def _with_item(command: tuple[str, ...], item: str) -> tuple[str, ...]:
    """The command parallel runs for ``item``: put in place of ``{}``, else appended."""
    if any("{}" in word for word in command):
        return tuple(word.replace("{}", item) for word in command)
    return (*command, item)


def _inner_start(args: Sequence[str], spec: _Spec) -> int | None:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if spec.skip_assignments and is_assignment(arg):
            i += 1
            continue
        if not is_option(arg):
            break
        if arg in spec.no_exec_flags:
            return None
        i += 2 if arg in spec.value_options else 1
    i += spec.positionals_to_skip
    return i if i < len(args) else None


def _xargs_argv(options: Sequence[str], argv: tuple[str, ...]) -> tuple[str, ...]:
    """xargs appends stdin items, or substitutes them for the -I replacement string."""
    replace: str | None = None
    for i, opt in enumerate(options):
        if opt in ("-I", "--replace") and i + 1 < len(options):
            replace = options[i + 1]
        elif opt.startswith("-I") and len(opt) > 2:
            replace = opt[2:]
        elif opt == "-i" or opt.startswith("--replace="):
            replace = opt.partition("=")[2] or "{}"
    if replace is None:
        return (*argv, DYNAMIC)
    return tuple(a.replace(replace, DYNAMIC) for a in argv)


# Wrappers' options naming the directory the command runs in.
_CHDIR_OPTIONS = {
    "env": ("-C", "--chdir"),
    "sudo": ("-D", "--chdir"),
    "nsenter": ("-w", "--wd"),
    "unshare": ("-w", "--wd"),
    "systemd-run": ("--working-directory",),
    "runuser": (),
}


def working_directory(name: str, args: Sequence[str]) -> str | None:
    """The directory a wrapper runs its command in (``env -C dir``, ``sudo -D dir``),
    None when it does not move it."""
    if name == "cmake":  # cmake -E chdir DIR cmd
        at = args.index("-E") + 1 if "-E" in args else len(args)
        return args[at + 1] if at + 1 < len(args) and args[at] == "chdir" else None
    options = _CHDIR_OPTIONS.get(name, ())
    for i, arg in enumerate(args):
        if arg == "--" or (not is_option(arg) and (i == 0 or args[i - 1] not in options)):
            break
        if arg in options and i + 1 < len(args):
            return args[i + 1]
        for option in options:
            if arg.startswith(option + "=") or (len(option) == 2 and arg.startswith(option)):
                return arg.split("=", 1)[1] if "=" in arg else arg[len(option) :]
    return None


def find_args(args: Sequence[str]) -> tuple[str, ...]:
    """find's words with a "--" ending its leading options read as ``-P`` (its default,
    the same for find): rules stop reading options at "--", and ``find -- / -delete``
    deletes as ``find / -delete`` does."""
    out = list(args)
    i = 0
    while i < len(out) and out[i] in _FIND_OPTIONS:
        i += 2 if out[i] in ("-D", "-O") else 1
    if i < len(out) and out[i] == "--":
        out[i] = "-P"
    return tuple(out)


def find_writes(args: Sequence[str]) -> list[str]:
    """Files find's actions write (-fprint FILE, -fprint0 FILE, -fls FILE, -fprintf FILE
    FORMAT): as an output redirection would."""
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg in _FIND_WRITES]


_FIND_OPTIONS = frozenset({"-H", "-L", "-P", "-D", "-O"})
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fls", "-fprintf"})


def _find_exec(args: Sequence[str]) -> list[Invocation]:
    roots: list[str] = []
    i = 0
    while i < len(args) and args[i] in _FIND_OPTIONS:  # -L / -exec ...: / is a root
        i += 2 if args[i] in ("-D", "-O") else 1
    for arg in args[i:]:
        if arg.startswith(_FIND_EXPRESSION_START):
            break
        roots.append(arg)
    roots = roots or ["."]
    found: list[Invocation] = []
    i = 0
    while i < len(args):
        if args[i] not in _FIND_EXEC:
            i += 1
            continue
        end = i + 1
        while end < len(args) and args[end] not in (";", "+"):
            end += 1
        # {} stands for each file found; the starting points are the worst case
        # (find -exec rm -rf {} on / does reach / itself).
        argv: list[str] = []
        for word in args[i + 1 : end]:
            argv.extend(roots if word == "{}" else [word])
        if argv:
            found.append(Invocation(tuple(argv), i + 1))
        i = end + 1
    return found


def script_of(name: str, args: Sequence[str]) -> str | None:
    """Shell script text that ``name args...`` runs, if any (``bash -c``, ``eval``...)."""
    if in_command_set(name, "shells"):
        return _shell_c_script(args)
    if name == "eval":
        return " ".join(args) if args else None
    if name in ("su", "runuser"):
        return _option_value(args, ("-c", "--command"))
    if name == "trap":
        return args[0] if len(args) >= 2 and not is_option(args[0]) else None
    if name == "watch":
        return _watch_script(args)
    if name == "sg":  # sg group [-c] 'cmd'
        words = [a for a in args[1:] if a != "-c"]
        return " ".join(words) if words else None
    if name == "entr" and "-s" in args:  # entr -s 'cmd': run by $SHELL
        words = positional_args(args)
        return words[0] if words else None
    if name == "alias":
        # Aliases only expand with `shopt -s expand_aliases`, but their bodies are
        # cheap to check and an alias is a classic way to hide a command.
        bodies = [a.split("=", 1)[1] for a in args if "=" in a]
        return "\n".join(bodies) if bodies else None
    return None


_SSH_VALUES = frozenset(
    {"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p"}
    | {"-Q", "-R", "-S", "-W", "-w", "-B"}
)


def remote_script_of(name: str, args: Sequence[str]) -> str | None:
    """The command ``ssh [options] host command...`` runs on the remote host."""
    if name != "ssh":
        return None
    start = _inner_start(args, _Spec(_SSH_VALUES, positionals_to_skip=1))
    return " ".join(args[start:]) if start is not None else None


def inline_code(name: str, args: Sequence[str]) -> str | None:
    """Code given on an interpreter's command line (``python -c CODE``, ``perl -e CODE``)."""
    if not in_command_set(name, "interpreters"):
        return None
    for i, arg in enumerate(args):
        if arg == "--" or not is_option(arg):
            return None
        is_code_flag = arg in ("--eval", "--command") or (
            not arg.startswith("--") and arg[-1] in "ceEr"
        )
        if is_code_flag:
            return args[i + 1] if i + 1 < len(args) else None
    return None


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def download_outputs(name: str, args: Sequence[str]) -> list[str]:
    """Files a curl / wget invocation writes (explicit names or the URL's basename), or
    that scp or rsync copies from another host (``scp host:x.sh .``)."""
    if name in ("scp", "rsync"):
        return _remote_copy_outputs(args)
    if name not in ("curl", "wget"):
        return []
    letter, long_flag = ("o", "--output") if name == "curl" else ("O", "--output-document")
    remote_flags = ("-O", "--remote-name") if name == "curl" else ()
    outputs: list[str] = []
    for i, arg in enumerate(args):
        following = args[i + 1] if i + 1 < len(args) else ""
        if arg == long_flag:
            outputs.append(following)
        elif arg.startswith(long_flag + "="):
            outputs.append(arg.split("=", 1)[1])
        elif is_option(arg) and not arg.startswith("--") and letter in arg[1:]:
            # short cluster: -o FILE, -ofile, -sSLo FILE, -qO- ...
            attached = arg[arg.index(letter, 1) + 1 :]
            outputs.append(attached or following)
    urls = [a for a in args if _URL.match(a)]
    uses_remote_name = name == "wget" and not outputs
    if uses_remote_name or any(f in flag_set(tuple(args)) for f in remote_flags):
        outputs.extend(u.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] for u in urls)
    return [o for o in outputs if o and o != "-"]


def shell_c_arguments(args: Sequence[str]) -> tuple[str, ...] | None:
    """The arguments after a shell's ``-c`` script (``sh -c 'rm $1' _ x``: ``_`` is $0,
    ``x`` is $1), without $0; None when there are none or no ``-c``."""
    for i, arg in enumerate(args):
        if arg == "--" or not is_option(arg):
            return None
        if not arg.startswith("--") and "c" in arg[1:]:
            after = [k for k in range(i + 1, len(args)) if not is_option(args[k])]
            script = after[0] if after else len(args)  # its first word that is no option
            return tuple(args[script + 2 :]) if script + 1 < len(args) else None
    return None


_REMOTE = re.compile(r"^(?:[^/:]+@)?[^/:]+:|^rsync://")


def _remote_copy_outputs(args: Sequence[str]) -> list[str]:
    words = positional_args(args)
    if len(words) < 2 or _REMOTE.match(words[-1]) or not any(_REMOTE.match(w) for w in words):
        return []
    target = words[-1]
    sources = [w for w in words[:-1] if _REMOTE.match(w)]
    if len(words) > 2 or target.endswith("/") or target == ".":
        names = [_REMOTE.sub("", s).rstrip("/").rsplit("/", 1)[-1] for s in sources]
        return [f"{target.rstrip('/')}/{n}" for n in names if n]
    return [target]


def _shell_c_script(args: Sequence[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--" or not is_option(arg):
            return None
        if not arg.startswith("--") and "c" in arg[1:]:
            rest = positional_args(args[i + 1 :])
            return rest[0] if rest else None
    return None


def _option_value(args: Sequence[str], names: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            return args[i + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _watch_script(args: Sequence[str]) -> str | None:
    start = _inner_start(args, _spec("-n", "--interval", "-d", "--differences"))
    return " ".join(args[start:]) if start is not None else None


def code_arg_indices(name: str, args: Sequence[str]) -> frozenset[int]:
    """Indices of ``args`` that ``name`` runs as code (script text or script file).

    Used to decide whether a substitution's output is executed: ``bash <(curl x)``
    and ``python3 -c "$(curl x)"`` run it, ``echo "$(curl x)"`` does not.
    """
    if name == "eval":
        return frozenset(range(len(args)))
    if name in ("source", "."):
        return frozenset({0}) if args else frozenset()
    programs = programs_read(name, args)
    if programs:  # make -f <(curl x), vim -S <(...), awk -f <(...)
        return frozenset(p.index for p in programs if p.index is not None)
    if not (in_command_set(name, "shells") or in_command_set(name, "interpreters")):
        return frozenset()
    code_letters = "c" if in_command_set(name, "shells") else "ceEr"
    for i, arg in enumerate(args):
        if arg == "--":
            return frozenset({i + 1})
        if not is_option(arg):
            return frozenset({i})
        if arg in ("--eval", "--command", "--print") or (
            not arg.startswith("--") and any(c in arg[1:] for c in code_letters)
        ):
            return frozenset({i + 1})
    return frozenset()


#: Commands that run their stdin as a shell script later (at, batch).
SCHEDULERS = frozenset({"at", "batch"})
# at options that take the job from a file or do not make one (list, remove, show).
_SCHEDULER_NO_STDIN = frozenset({"-f", "-l", "-r", "-d", "-c", "-V"})


def executes_stdin(name: str | None, args: Sequence[str], stdin_args: bool = False) -> bool:
    """True if the command runs what arrives on its stdin as code (``curl | sh``)."""
    if name is None:
        return True  # a dynamic command could be a shell
    if name in SCHEDULERS:  # at now <<< 'cmd': the job is its stdin, run by sh later
        return not (flag_set(tuple(args)) & _SCHEDULER_NO_STDIN)
    if any(p.index is None for p in programs_read(name, args)):
        return True  # make -f -, vim -es, awk -f /dev/stdin
    is_shell = in_command_set(name, "shells")
    if not (is_shell or in_command_set(name, "interpreters")):
        return name in ("source", ".") and any(_reads_descriptor(a) for a in args)
    if stdin_args:
        return True  # xargs sh ...: stdin becomes the script or its arguments
    flags = flag_set(tuple(args))
    if is_shell and "-s" in flags:
        return True
    code_flags = {"-c"} if is_shell else {"-c", "-e", "-E", "-r", "-m", "-p", "--eval", "--print"}
    if code_flags & flags:
        return False
    files = positional_args(args)
    return all(a == "-" for a in files) or _reads_descriptor(files[0])


def _reads_descriptor(path: str) -> bool:
    """Whether a script file named ``path`` is the command's stdin or another open
    descriptor (``sh /dev/stdin``, ``bash /dev/fd/3``): what a pipe, a redirection or
    a process substitution feeds it is the script."""
    return path in STDIN_FILES or bool(re.fullmatch(r"/dev/fd/\d+|/proc/self/fd/\d+", path))
