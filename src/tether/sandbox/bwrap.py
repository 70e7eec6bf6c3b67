"""bubblewrap: whether it works here, and the command line that wraps one call."""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tether.sandbox import syscall_filter

# Long enough for a loaded machine, short enough that a hung probe does not stall start-up.
_PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class Probe:
    """Whether ``bwrap`` can build a sandbox on this machine, and if not, why."""

    works: bool
    path: str | None
    # Why not, or (when it works) why without the system call filter.
    reason: str
    # Whether calls run under the system call filter (syscall_filter.py).
    filtered: bool = False


@dataclass(frozen=True)
class Confinement:
    """What one sandboxed call may see."""

    workspace: Path
    # Directories (and files) the call must not see at all: Tether's own state.
    hidden: tuple[Path, ...]
    cwd: Path
    network: bool
    # Paths under /tmp shown read-only over the private /tmp (what a server's own
    # command names, see servers.py); Tether's state stays hidden over them.
    shown: tuple[Path, ...] = ()


def _namespace_args(network: bool) -> list[str]:
    # --cap-drop ALL matters when the server runs as root: bwrap then keeps every
    # capability by default, and CAP_SYS_ADMIN could unmount what hides TETHER_HOME.
    # No --new-session: the call keeps the process group the coordinator signals, and
    # it has no terminal (stdin is /dev/null) for TIOCSTI to abuse.
    args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        args.append("--unshare-net")
    return [*args, "--cap-drop", "ALL", "--die-with-parent"]


# Kernel settings under the call's fresh /proc, shown read-only: a call running as root
# (capabilities dropped) could otherwise write /proc/sys (kernel.core_pattern runs a
# program as root outside every namespace) or /proc/sysrq-trigger. bwrap does not
# protect them itself: its check, access("/proc/sys", W_OK), never passes.
_KERNEL_SETTINGS = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")


def _run_dirs() -> tuple[str, ...]:
    """Where services keep their sockets: /run, and /var/run unless it links there."""
    return tuple(d for d in ("/run", "/var/run") if Path(d).is_dir() and not Path(d).is_symlink())


_RUN_DIRS = _run_dirs()
# What some systems run programs from under /run (NixOS and Guix: the system's profile
# and its setuid wrappers), shown again over the empty /run.
_RUN_KEPT = ("/run/current-system", "/run/wrappers", "/run/setuid-programs")


def _mount_args(conf: Confinement) -> list[str]:
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for setting in _KERNEL_SETTINGS:
        args += ["--ro-bind-try", setting, setting]
    args += ["--tmpfs", "/tmp"]
    if not conf.network:
        # Without the network, local services' unix sockets are out of reach too: a
        # database's, Docker's or D-Bus's socket can do more than any TCP port.
        args += [arg for run in _RUN_DIRS for arg in ("--tmpfs", run)]
        for kept in _RUN_KEPT:
            args += ["--ro-bind-try", kept, kept]
    for path in conf.shown:
        args += ["--ro-bind", str(path), str(path)]
    inside: list[Path] = []
    outside: list[Path] = []
    for path in conf.hidden:
        (inside if path.is_relative_to(conf.workspace) else outside).append(path)
    # Order matters: a later mount covers an earlier one. State outside the workspace is
    # hidden before the workspace is bound back (the default workspace lives inside
    # TETHER_HOME); state inside the workspace is hidden after.
    for path in outside:
        args += _hide(path)
    args += ["--bind", str(conf.workspace), str(conf.workspace)]
    for path in inside:
        if hide := _hide(path):
            args += [*_pinned_ancestors(conf.workspace, path), *hide]
    return args


def _pinned_ancestors(workspace: Path, hidden: Path) -> list[str]:
    """Each directory between the workspace and a hidden path in it, bound onto itself:
    a mount point cannot be renamed (EBUSY), and renaming one of them (``mv .config x``
    with the home at ``.config/tether``) moved the real home out from under what hides
    it."""
    args: list[str] = []
    for ancestor in reversed(hidden.relative_to(workspace).parents[:-1]):
        directory = str(workspace / ancestor)
        args += ["--bind", directory, directory]
    return args


def _hide(path: Path) -> list[str]:
    if path.is_dir():
        return ["--tmpfs", str(path)]
    if path.exists():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


def wrap(
    bwrap: str, conf: Confinement, command: Sequence[str], filtered: bool = False
) -> list[str]:
    """The argv that runs ``command`` inside the sandbox ``conf`` describes; if
    ``filtered``, under a seccomp filter read from a descriptor the starter
    attaches (see :mod:`tether.sandbox.syscall_filter`)."""
    seccomp = ["--seccomp", syscall_filter.FD_SLOT] if filtered else []
    return [
        bwrap,
        *_mount_args(conf),
        *_namespace_args(conf.network),
        *seccomp,
        "--chdir",
        str(conf.cwd),
        "--",
        *command,
    ]


def probe(bwrap: str = "bwrap") -> Probe:
    """Try a throw-away sandbox with every namespace a call gets, under the system call
    filter, and without it if that fails (blocking: run it in a thread). Says why not
    when it fails, for the start-up warning or refusal."""
    path = shutil.which(bwrap)
    if path is None:
        return Probe(False, None, f"{bwrap!r} was not found on PATH (install bubblewrap)")
    program = syscall_filter.program(deny_unix_sockets=True)
    if program is None:
        unfiltered = f"no system call filter for this machine ({platform.machine()})"
    else:
        failed = _attempt(path, program)
        if failed is None:
            return Probe(True, path, "", filtered=True)
        unfiltered = f"the system call filter does not work here: {failed}"
    failed = _attempt(path, None)
    if failed is not None:
        return Probe(False, path, failed)
    return Probe(True, path, unfiltered, filtered=False)


def _attempt(path: str, program: bytes | None) -> str | None:
    """Why a throw-away sandbox (under ``program`` if given) failed, or None if it ran."""
    tmp = Path("/tmp")
    conf = Confinement(workspace=tmp, hidden=(), cwd=tmp, network=False)
    wrapped = wrap(path, conf, ["/bin/true"], filtered=program is not None)
    try:
        with syscall_filter.attached(wrapped, program) as (argv, fds):
            done = subprocess.run(
                argv, capture_output=True, timeout=_PROBE_TIMEOUT, check=False, pass_fds=fds
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{path} could not run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
        return f"{path} cannot create a sandbox here: {said}"
    return None
