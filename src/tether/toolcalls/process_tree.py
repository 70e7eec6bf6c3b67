"""Find and signal every process a tool call started.

A call's processes are found three ways, since each alone can miss some: the members of
its process group, the descendants of its root process, and any process carrying the
call's marker in its environment (a child that called setsid and was orphaned is still
found that way). A call in a limits group that knows its members (a cgroup, which no
process of the call can leave) is found by reading the group instead: the other ways
scan every process on the machine, and with a thousand calls live that scan cost a
stop about half a second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil

from tether.toolcalls.launcher import MARKER_VAR

# psutil's create_time and time.time() come from different clocks (boot time plus
# jiffies versus the wall clock); allow this much disagreement when filtering by age.
_CLOCK_SLACK = 2.0


@dataclass(frozen=True)
class Target:
    """One call's processes: its root, its process group, its environment marker, and
    when it started (processes older than that cannot be the call's)."""

    root_pid: int | None
    pgid: int | None
    marker: str | None
    since: float | None = None
    # The root only supervises (the sandbox's bwrap, which ends when the command does
    # and whose death would SIGKILL the command at once): a graceful stop spares it.
    spare_root: bool = False
    # Every process of the call, read from its limits group (blocking; None: the call
    # has no group that can tell, so the process table is scanned).
    members: Callable[[], list[int]] | None = None

    def reaped(self) -> Target:
        """This target once its root has been reaped: the root's pid may be anyone's
        now, and the group's number too once the group has emptied (see
        :func:`group_after_reap`). Keep the result, and ask it again at the next look."""
        return dataclasses.replace(self, root_pid=None, pgid=group_after_reap(self.pgid))


def group_after_reap(pgid: int | None) -> int | None:
    """The number of a call's process group, asked once its root (the group's leader)
    has been reaped: ``pgid`` while it can only be the call's group, else None.

    A group keeps its number while it has a member; once the last one goes, the number
    is free, and with pid_max often 32,768 it is soon some new process's pid, and that
    process may lead a group of its own by it. The number is given up when the group has
    no member we may signal, or when a process of that pid exists (the kernel hands out
    no pid a group still uses, and the root that had it is reaped: so the call's group
    is gone). Keep the answer: ask again with it, never with the number given up.
    """
    if pgid is None:
        return None
    try:
        os.killpg(pgid, 0)
    except OSError:  # no member left, or none of ours
        return None
    try:
        os.kill(pgid, 0)
    except ProcessLookupError:
        return pgid
    except PermissionError:
        pass
    return None


def find_trees(targets: Sequence[Target], scan_all: bool = False) -> list[psutil.Process]:
    """Every live process that belongs to any of ``targets``, the server excluded.

    ``scan_all``: scan for grouped targets too (the last pass of a stop, off the stop's
    critical path: a process moved out of its group by a service manager that the
    sandbox could reach, ``systemd-run --user`` say, still carries the marker).

    One pass over the process table serves all targets, so stopping many calls at once
    costs one scan, not one per call. The environment (the costly read) is only looked
    at for processes young enough to belong to a call.
    """
    me = os.getpid()
    found = _grouped([t for t in targets if t.members is not None])
    scanned = list(targets) if scan_all else [t for t in targets if t.members is None]
    if scanned:
        found.update(_scanned(scanned))
    found.pop(me, None)
    return list(found.values())


def _grouped(targets: Sequence[Target]) -> dict[int, psutil.Process]:
    found: dict[int, psutil.Process] = {}
    for target in targets:
        assert target.members is not None
        # The root too: it joins the group in its first step, and may not have yet.
        roots = [target.root_pid] if target.root_pid is not None else []
        for pid in [*roots, *target.members()]:
            with contextlib.suppress(psutil.Error):
                found[pid] = psutil.Process(pid)
    return found


def _scanned(targets: Sequence[Target]) -> dict[int, psutil.Process]:
    me = os.getpid()
    table = list(psutil.process_iter(["ppid", "create_time"]))
    children = _children_of(table)
    found = _descendants_of({t.root_pid for t in targets if t.root_pid is not None}, children)
    pgids = {t.pgid for t in targets if t.pgid is not None}
    markers = {t.marker for t in targets if t.marker is not None}
    starts = [t.since for t in targets]
    oldest = None if None in starts or not starts else min(s for s in starts if s is not None)
    for proc in table:
        if proc.pid in found or proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if pgids and os.getpgid(proc.pid) in pgids:
                found[proc.pid] = proc
                continue
            created = proc.info.get("create_time")
            if not markers or (oldest is not None and created and created < oldest - _CLOCK_SLACK):
                continue
            if proc.environ().get(MARKER_VAR) in markers:
                found[proc.pid] = proc
    # What a found process started is the call's even where the marker cannot be read:
    # a child that cleared its environment, or one in the middle of execve (/proc shows
    # an empty environment until the new program's is set up).
    found.update(_descendants_of(set(found), children))
    found.pop(me, None)
    return found


_Children = dict[int, list[psutil.Process]]


def _children_of(table: list[psutil.Process]) -> _Children:
    """Each pid's children, from one read of the table (psutil's ``children()`` reads
    the whole table per call: 1,000 calls made that 1,000 reads)."""
    children: _Children = {}
    for proc in table:
        children.setdefault(proc.info.get("ppid") or 0, []).append(proc)
    return children


def _descendants_of(roots: set[int], children: _Children) -> dict[int, psutil.Process]:
    """The roots that are in the table, and every descendant of them."""
    known = {c.pid: c for kids in children.values() for c in kids}
    found: dict[int, psutil.Process] = {}
    todo = [known[pid] for pid in roots if pid in known]
    while todo:
        proc = todo.pop()
        if proc.pid in found:
            continue
        found[proc.pid] = proc
        todo.extend(children.get(proc.pid, []))
    return found


def signal_all(procs: list[psutil.Process], sig: signal.Signals) -> None:
    """Send ``sig`` to each process, ignoring ones already gone."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def kill_all(procs: list[psutil.Process], targets: Sequence[Target]) -> None:
    """SIGKILL ``procs`` and the process group of each target that one of them is in.

    A list read before the kill misses what is forked after the read: bwrap's sandbox
    child, cloned in a call's first milliseconds, outlived a force stop that way (its
    command running on, or blocked for ever on the go of its killed parent), and so did
    a fork loop's children after a graceful stop. A group takes in whatever its members
    fork up to the signal, and the kernel lets no fork escape a signal to the group.
    While a process read as the call's is still in the group, its number cannot have
    been given to another group (a group keeps its number while it has a member).
    """
    groups = set()
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            groups.add(os.getpgid(proc.pid))
    for pgid in {t.pgid for t in targets if t.pgid is not None} & groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    signal_all(procs, signal.SIGKILL)


def ask_to_end(procs: list[psutil.Process], targets: Sequence[Target]) -> None:
    """SIGTERM to each of ``procs`` but the roots that only supervise (see
    :attr:`Target.spare_root`): those end when their command does."""
    spared = {t.root_pid for t in targets if t.spare_root}
    signal_all([p for p in procs if p.pid not in spared], signal.SIGTERM)


def terminate_many(trees: Sequence[Callable[[], Target]], grace: float, force: bool) -> None:
    """Stop ``trees`` (each gives its target when asked): SIGTERM, then SIGKILL for
    survivors after ``grace`` seconds (``force``: SIGKILL at once).

    Blocking (it waits for processes to exit): call it from a worker thread.
    """
    targets = [tree() for tree in trees]
    procs = find_trees(targets)
    if not procs:
        return
    if force:
        kill_all(procs, targets)
        _wait_gone(procs, 1.0)
        return
    ask_to_end(procs, targets)
    alive = _wait_gone(procs, grace)
    # Look again: a process may have forked while being told to stop. Targets are taken
    # again: a root reaped meanwhile is no longer named by pid.
    targets = [tree() for tree in trees]
    survivors = {p.pid: p for p in alive}
    survivors.update({p.pid: p for p in find_trees(targets, scan_all=True)})
    if survivors:
        kill_all(list(survivors.values()), targets)
        _wait_gone(list(survivors.values()), 1.0)


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to ``timeout`` seconds for ``procs`` to end; those still running. A zombie
    has ended. Nothing is reaped: psutil's ``wait_procs`` reaps a child of the server (a
    call's root) in this thread, and whoever waited on it then got no exit status (the
    server reported 255 for a call stopped by SIGTERM)."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        procs = [p for p in procs if _running(p)]
        left = deadline - time.monotonic()
        if not procs or left <= 0:
            return procs
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_marked(marker: str, since: float | None) -> None:
    """SIGKILL what is left of a call whose pid and group numbers may have been reused
    since (a call the server lost track of): found by its ``marker`` only. Blocking."""
    target = Target(None, None, marker, since=since)
    terminate_many([lambda: target], 1.0, True)


def reap_groups(
    groups: list[tuple[int, float]],
    owner_prefixes: Sequence[str],
    marker_prefixes: Sequence[str] = (),
) -> int:
    """Kill process groups (and marked processes) a crashed server left behind.

    ``groups`` holds (process group, epoch time the call started) of calls whose owners'
    markers begin with one of ``owner_prefixes``. A group whose number may now belong to
    something else is skipped: one recorded before the machine last booted, and one
    that no process carrying such a marker proves still the call's
    (``_still_a_calls_group``). ``marker_prefixes`` also finds processes by the marker
    in their environment (a call's setsid'd child outside its group); pass only
    prefixes of owners known to be gone.
    """
    killed = 0
    booted = psutil.boot_time()
    for pgid, started_at in groups:
        if started_at < booted or not _still_a_calls_group(pgid, tuple(owner_prefixes)):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
            killed += 1
    if marker_prefixes:
        prefixes = tuple(marker_prefixes)
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error, OSError):
                if proc.environ().get(MARKER_VAR, "").startswith(prefixes):
                    proc.kill()
                    killed += 1
    if killed:
        time.sleep(0.05)
    return killed


def _still_a_calls_group(pgid: int, prefixes: tuple[str, ...]) -> bool:
    """Whether group ``pgid`` is still a call's: its leader (the process of that number)
    carries a call marker with one of ``prefixes``, or, the leader gone, a member does.

    The kernel gives a group's number to nobody while a member lives, so one marked
    member proves the whole group the call's (unmarked members too: a command may clear
    its environment). A leaderless group with no marked member may be one that took
    the number after the call's emptied: it is left alone."""
    try:
        return _marked(psutil.Process(pgid), prefixes)
    except psutil.NoSuchProcess:
        pass
    except psutil.Error:
        return False  # not ours to read: not ours to kill
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) == pgid and _marked(proc, prefixes):
                return True
    return False


def _marked(proc: psutil.Process, prefixes: tuple[str, ...]) -> bool:
    return proc.environ().get(MARKER_VAR, "").startswith(prefixes)
