"""Choosing how limits are enforced here: cgroup v2, else cgroup v1, else rlimits."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import uuid
from pathlib import Path

from tether.sandbox import cgroup_v1, cgroup_v2
from tether.sandbox.groups import CallGroup, Enforcer, kill_members
from tether.sandbox.limits import Limits
from tether.sandbox.rlimits import Rlimits

log = logging.getLogger(__name__)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def choose(tag: str, *, reap: bool = False) -> Enforcer:
    """The best mechanism that works for this process (blocking: creates directories).

    ``tag`` names the server's own directory in each hierarchy, so two servers on one
    machine never share groups. ``reap``: the processes left in the groups a previous
    run of ``tag`` left are killed (see :func:`sweep`).
    """
    proc_cgroup, mounts = _read("/proc/self/cgroup"), _read("/proc/self/mounts")
    enforcer: Enforcer | None = cgroup_v2.detect(proc_cgroup, mounts, tag)
    if enforcer is None:
        enforcer = cgroup_v1.detect(proc_cgroup, mounts, tag)
    if enforcer is None:
        enforcer = Rlimits()
    sweep(enforcer, reap=reap)
    return enforcer


def sweep(enforcer: Enforcer, *, reap: bool = False) -> None:
    """Remove call groups a previous run left behind. Those still holding processes stay,
    unless ``reap``: then what they hold is killed first. Only the holder of the tag's
    lock may reap (a home's runner, or its server for its own groups): any group then
    found is a dead run's, and what it holds escaped that run's end (a daemon that left
    its session and cleared its environment is found by nothing else)."""
    for parent in getattr(enforcer, "parents", ()):
        for child in Path(parent).iterdir() if Path(parent).is_dir() else ():
            if child.is_dir() and child.name.startswith("call-"):
                if reap and (killed := kill_members(child)):
                    log.warning("killed %d process(es) a dead run's call left in %s", killed, child)
                with contextlib.suppress(OSError):
                    child.rmdir()


def new_group(enforcer: Enforcer, limits: Limits) -> CallGroup:
    """A fresh group for one call (blocking); rlimits if the mechanism fails now."""
    name = f"call-{uuid.uuid4().hex[:16]}"
    try:
        return enforcer.create(name, limits)
    except OSError:
        # Limits must hold even if the cgroup tree is suddenly not writable.
        log.exception("creating a %s group failed; rlimits instead", enforcer.mechanism)
        return Rlimits().create(name, limits)


def home_tag(home: Path) -> str:
    """Names one home's groups: the same across restarts, so a start sweeps what the
    last run on this home left (process markers are per owner instead)."""
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]
    return f"tether-{digest}"


def runner_tag(home: Path) -> str:
    """Names the groups of one home's keeper runner, apart from its servers' (a
    server's start sweeps its own, and must not take those of calls that outlive it)."""
    return f"{home_tag(home)}-keeper"
