"""The shell calls' boundary around a long-lived server command (an MCP stdio server).

A server gets what a sandboxed shell call gets: the filesystem read-only but the
workspace, a private /tmp, nothing of TETHER_HOME but the workspace, its own pid
namespace, no capabilities, death with its parent, and the network its client allows.
Its limits are one call's memory and process limits, held for the server's whole life
(a CPU-seconds limit would end a healthy server that simply lives long, so none).

The SDK spawns the server itself and takes no pre-exec hook, so joining the limits is a
small exec step at the head of the command (``enter_limits.py``), which also hands
bwrap the system call filter a call gets.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tether.sandbox import bwrap, enter_limits, syscall_filter
from tether.sandbox.cgroup_v1 import CgroupV1Group
from tether.sandbox.cgroup_v2 import CgroupV2Group
from tether.sandbox.groups import CallGroup
from tether.sandbox.limits import MIB, Limits
from tether.sandbox.rlimits import RlimitGroup


@dataclass
class SandboxedServer:
    """A server command wrapped for the sandbox, and the limits group it runs in."""

    argv: list[str]
    network: bool
    group: CallGroup

    def release(self) -> None:
        """Remove the server's group once its process has ended (blocking). A group
        still held (a process that outlived the transport) is left for the next start's
        sweep."""
        with contextlib.suppress(OSError):
            self.group.close()


def server_limits(call_limits: Limits) -> Limits:
    """A server's limits: one call's memory and processes, no CPU-seconds limit."""
    return Limits(call_limits.memory_mb, call_limits.max_processes, None)


def enter_args(group: CallGroup) -> list[str]:
    """The options of ``enter_limits.py`` that put its process under ``group``."""
    if isinstance(group, CgroupV2Group):
        return ["--procs", str(group.path / "cgroup.procs")]
    if isinstance(group, CgroupV1Group):
        dirs = [d for d in (group.memory, group.pids, group.cpuacct) if d is not None]
        return [arg for d in dirs for arg in ("--procs", str(d / "cgroup.procs"))]
    if isinstance(group, RlimitGroup):
        return _rlimit_args(group)
    raise TypeError(f"no way to join a {type(group).__name__} from a command")


def _rlimit_args(group: RlimitGroup) -> list[str]:
    args: list[str] = []
    limits = group.limits
    if limits.memory_mb is not None:
        args += ["--rlimit", f"as={limits.memory_mb * MIB}"]
    if limits.max_processes is not None and os.geteuid() != 0:
        # RLIMIT_NPROC counts every process of the user, as for a call (RlimitGroup.join).
        args += ["--rlimit", f"nproc={group.user_processes + limits.max_processes}"]
    return args


def wrap_server(
    bwrap_path: str,
    confinement: bwrap.Confinement,
    group: CallGroup,
    command: Sequence[str],
    program: bytes | None = None,
) -> SandboxedServer:
    """The argv that starts ``command`` under ``group``'s limits inside bwrap, under the
    system call filter ``program`` if given."""
    confinement = replace(confinement, shown=named_under_tmp(command))
    inner = bwrap.wrap(bwrap_path, confinement, command, filtered=program is not None)
    enter = enter_args(group)
    if program is not None:
        enter += enter_limits.piping(program, syscall_filter.FD_SLOT)
    argv = enter_limits.through(enter, inner)
    return SandboxedServer(argv, confinement.network, group)


_TMP = Path("/tmp")


def named_under_tmp(command: Sequence[str]) -> tuple[Path, ...]:
    """What the server's program is made of under /tmp, to show read-only in the sandbox
    (whose /tmp is private): the virtual environment its interpreter runs from, and the
    directory of each file its command names (a script). A server installed or checked
    out under /tmp would otherwise not find its own program. Directories it names are
    left private: a server may be given one to write in (blocking: stats the words)."""
    shown: list[Path] = []
    for word in command:
        path = Path(word)
        if not path.is_absolute() or not path.is_relative_to(_TMP) or not path.is_file():
            continue
        directory = path.parent
        if directory.name == "bin" and (directory.parent / "pyvenv.cfg").exists():
            directory = directory.parent  # its interpreter needs the environment's packages
        if directory != _TMP and directory not in shown:
            shown.append(directory)
    return tuple(shown)
