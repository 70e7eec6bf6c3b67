"""Join limits, then exec a command: the pre-exec step for a process Tether does not spawn.

    python -I -S enter_limits.py [--procs FILE]... [--rlimit NAME=VALUE]...
        [--pipe WORD=HEX]... -- COMMAND...

A shell call's process joins its limits group in a pre-exec hook. A long-lived server
(an MCP stdio server) is spawned by the MCP SDK, which takes no such hook, so its command
starts with this script instead: it moves itself into each cgroup (``cgroup.procs``
files), sets the rlimits, and replaces itself with the command, so that everything the
command starts is held from its first instruction. ``--pipe`` hands the command data on a
descriptor: the bytes HEX in a pipe, whose number replaces the first WORD of the command
(how bwrap gets its seccomp filter, see syscall_filter.py). It is run by path with ``-I -S``
(nothing but the standard library, no site packages), which keeps it fast and
independent of where Tether is installed or which environment the SDK passes on.
"""

from __future__ import annotations

import os
import resource
import sys

_RLIMITS = {"as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC}


def _join(path: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)


def _pipe(command: list[str], value: str) -> None:
    word, _, data = value.partition("=")
    read, write = os.pipe()
    os.write(write, bytes.fromhex(data))
    os.close(write)
    os.set_inheritable(read, True)
    command[command.index(word)] = str(read)


def _apply(option: str, value: str, command: list[str]) -> None:
    if option == "--procs":
        _join(value)
    elif option == "--pipe":
        _pipe(command, value)
    elif option == "--rlimit":
        name, _, amount = value.partition("=")
        limit = int(amount)
        resource.setrlimit(_RLIMITS[name], (limit, limit))
    else:
        raise SystemExit(f"enter_limits: unknown option {option!r}")


def through(options: list[str], command: list[str]) -> list[str]:
    """The argv that runs ``command`` behind this step with ``options``."""
    return [sys.executable, "-I", "-S", __file__, *options, "--", *command]


def piping(program: bytes, slot: str) -> list[str]:
    """The option that hands ``program`` to the command where it says ``slot``."""
    return ["--pipe", f"{slot}={program.hex()}"]


def main(argv: list[str]) -> None:
    if "--" not in argv:
        raise SystemExit("enter_limits: no command after '--'")
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    if not command or len(options) % 2:
        raise SystemExit("enter_limits: every option takes a value, and a command is needed")
    for option, value in zip(options[::2], options[1::2], strict=True):
        _apply(option, value, command)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
