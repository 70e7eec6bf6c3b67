"""Finding a call's processes: from its limits group when the group can tell, else by
group, descendants and marker from a scan of the process table; and killing them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator

import psutil
import pytest

from tether.toolcalls.launcher import MARKER_VAR
from tether.toolcalls.process_tree import Target, find_trees, kill_all


@pytest.fixture
def marked() -> Iterator[subprocess.Popen[bytes]]:
    """A process in a session of its own, carrying a call's marker."""
    env = {**os.environ, MARKER_VAR: "test-find-trees:call"}
    proc = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_a_call_without_a_group_is_found_by_its_marker(marked: subprocess.Popen[bytes]) -> None:
    target = Target(None, None, "test-find-trees:call", since=time.time() - 60)
    assert marked.pid in {p.pid for p in find_trees([target])}


def test_a_call_with_a_group_is_what_the_group_holds(marked: subprocess.Popen[bytes]) -> None:
    # The group's word is the whole tree: the same marker is not looked for (no scan).
    empty = Target(None, None, "test-find-trees:call", members=lambda: [])
    assert find_trees([empty]) == []
    held = Target(None, None, None, members=lambda: [marked.pid])
    assert [p.pid for p in find_trees([held])] == [marked.pid]


def test_a_root_not_yet_in_its_group_is_found_too(marked: subprocess.Popen[bytes]) -> None:
    target = Target(marked.pid, marked.pid, None, members=lambda: [])
    assert [p.pid for p in find_trees([target])] == [marked.pid]


def test_a_member_that_has_gone_is_skipped(marked: subprocess.Popen[bytes]) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    target = Target(None, None, None, members=lambda: [gone.pid, marked.pid])
    assert [p.pid for p in find_trees([target])] == [marked.pid]


def test_the_last_pass_of_a_stop_scans_for_grouped_calls_too(
    marked: subprocess.Popen[bytes],
) -> None:
    # A process moved out of its group (by a service manager, say) still has the marker.
    target = Target(None, None, "test-find-trees:call", since=time.time() - 60, members=list)
    assert find_trees([target]) == []
    assert marked.pid in {p.pid for p in find_trees([target], scan_all=True)}


@contextlib.contextmanager
def _root_with_a_child(then: str) -> Iterator[tuple[subprocess.Popen[str], psutil.Process]]:
    """A root in a session of its own, and the child it forked into its process group
    (``then``: what the root does next); both gone afterwards."""
    with subprocess.Popen(
        ["sh", "-c", f"sleep 30 & echo $!; {then}"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as root:
        assert root.stdout is not None
        child = psutil.Process(int(root.stdout.readline()))
        try:
            yield root, child
        finally:
            for pid in (child.pid, root.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_a_kill_reaches_what_the_root_forked_after_the_tree_was_read() -> None:
    with _root_with_a_child("wait") as (root, child):
        # The tree as read before the fork: the root alone.
        kill_all([psutil.Process(root.pid)], [Target(root.pid, root.pid, None)])
        assert root.wait(timeout=10) == -signal.SIGKILL
        child.wait(timeout=10)


def test_a_group_none_of_the_read_processes_is_in_is_not_signalled() -> None:
    # The root, once reaped, no longer holds its number: it may name another group.
    with _root_with_a_child("exit 0") as (root, child):
        read = psutil.Process(root.pid)
        assert root.wait(timeout=10) == 0
        kill_all([read], [Target(root.pid, root.pid, None)])
        assert child.status() != psutil.STATUS_ZOMBIE


def test_what_a_marked_process_started_is_found_even_without_the_marker() -> None:
    """A call's process outside its group (it called setsid) whose child cleared its
    environment, or was in the middle of ``execve`` when the table was read (``/proc``
    shows an empty environment then): the child is the marked process's, so the call's."""
    env = {**os.environ, MARKER_VAR: "test-find-trees:parent"}
    script = "env -i sh -c 'echo $$; sleep 30; :' & wait"
    with subprocess.Popen(
        ["sh", "-c", script], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    ) as marked_parent:
        assert marked_parent.stdout is not None
        unmarked = psutil.Process(int(marked_parent.stdout.readline()))
        try:
            assert MARKER_VAR not in unmarked.environ()
            target = Target(None, None, "test-find-trees:parent", since=time.time() - 60)
            found = {p.pid for p in find_trees([target])}
            assert {marked_parent.pid, unmarked.pid} <= found
        finally:
            os.killpg(marked_parent.pid, signal.SIGKILL)
