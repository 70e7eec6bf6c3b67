"""Reaping what a crashed server left: only groups recorded since the machine booted,
and only while their number still names a call's group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

from tether.toolcalls.launcher import MARKER_VAR
from tether.toolcalls.process_tree import reap_groups

DEAD = "tether-dead-owner:"

Start = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def start_group() -> Iterator[Start]:
    """Start ``sleep 30`` as the leader of a group of its own (``marker``: the call
    marker in its environment); every one started is killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []

    def start(marker: str | None = f"{DEAD}call-1") -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != MARKER_VAR}
        if marker is not None:
            env[MARKER_VAR] = marker
        started.append(subprocess.Popen(["sleep", "30"], start_new_session=True, env=env))
        return started[-1]

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def test_a_group_recorded_before_the_last_boot_is_left_alone(start_group: Start) -> None:
    leader = start_group()
    before_boot = psutil.boot_time() - 60
    assert reap_groups([(leader.pid, before_boot)], (DEAD,)) == 0
    assert _alive(leader)


def test_a_call_group_recorded_since_boot_is_killed(start_group: Start) -> None:
    leader = start_group()
    assert reap_groups([(leader.pid, time.time())], (DEAD,)) == 1
    leader.wait(timeout=5)
    assert not _alive(leader)


@pytest.mark.parametrize("marker", [None, "tether-a-live-owner:call-9"])
def test_a_group_number_given_to_another_process_since_is_left_alone(
    start_group: Start, marker: str | None
) -> None:
    """The row's group number now names a process that is not a call of a dead owner
    (the number was freed and given again): it lives, however recent the row."""
    leader = start_group(marker)
    assert reap_groups([(leader.pid, time.time())], (DEAD,)) == 0
    assert _alive(leader)


def _leaderless_group(marker: str | None) -> tuple[int, psutil.Process]:
    """A group whose leader (a shell) has exited, leaving a member in it: a second shell
    waiting on ``sleep 30``; the marker (``None``: none) is in all their environments.
    Returns (group, member).

    The member names itself once it runs as a shell, so its environment is readable
    when the test reads it: a process in the middle of ``execve`` shows an empty one
    (``$!`` of a backgrounded ``sleep`` was read in that window on a loaded CI run).
    It does not ``exec`` the ``sleep``: ``; :`` keeps it from being the last command."""
    env = {k: v for k, v in os.environ.items() if k != MARKER_VAR}
    if marker is not None:
        env[MARKER_VAR] = marker
    shell = subprocess.Popen(
        ["sh", "-c", "sh -c 'echo $$; sleep 30; :' &"],
        start_new_session=True,
        env=env,
        stdout=subprocess.PIPE,
    )
    assert shell.stdout is not None
    with shell.stdout:
        member = psutil.Process(int(shell.stdout.readline()))
    shell.wait()
    return shell.pid, member


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def test_a_call_group_whose_leader_is_gone_is_still_killed() -> None:
    """A leader that exited leaves its group number taken while a member lives: the
    member (here started by the leader's shell, which then exits) dies."""
    pgid, member = _leaderless_group(f"{DEAD}call-2")
    try:
        assert reap_groups([(pgid, time.time())], (DEAD,)) == 1
        member.wait(timeout=5)
    finally:
        _kill_group(pgid)


@pytest.mark.parametrize("marker", [None, "tether-a-live-owner:call-9"])
def test_a_leaderless_group_with_no_call_member_is_left_alone(marker: str | None) -> None:
    """The call's group emptied, its number went to a new group whose leader has also
    exited: no member carries a dead owner's marker, so nothing proves the group the
    call's, and it lives."""
    pgid, member = _leaderless_group(marker)
    try:
        assert reap_groups([(pgid, time.time())], (DEAD,)) == 0
        assert member.is_running() and member.status() != psutil.STATUS_ZOMBIE
    finally:
        _kill_group(pgid)
        with contextlib.suppress(psutil.NoSuchProcess):
            member.wait(timeout=5)
