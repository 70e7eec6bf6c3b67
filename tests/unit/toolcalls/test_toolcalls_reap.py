"""Reaping what a crashed server left: only groups recorded since the machine booted,
and never a number given to another process since."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import psutil
import pytest

from tether.toolcalls.process_tree import reap_groups


@pytest.fixture
def orphan_group() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def test_a_group_recorded_before_the_last_boot_is_left_alone(
    orphan_group: subprocess.Popen[bytes],
) -> None:
    before_boot = psutil.boot_time() - 60
    assert reap_groups([(orphan_group.pid, before_boot)]) == 0
    assert _alive(orphan_group)


def test_a_group_recorded_since_boot_is_killed(orphan_group: subprocess.Popen[bytes]) -> None:
    assert reap_groups([(orphan_group.pid, time.time())]) == 1
    orphan_group.wait(timeout=5)
    assert not _alive(orphan_group)


def test_a_group_whose_number_was_reused_after_the_call_is_left_alone(
    orphan_group: subprocess.Popen[bytes],
) -> None:
    """The row's group number now names a process that started well after the call
    (the number was freed and given again): it is not the call's, and lives."""
    started = psutil.Process(orphan_group.pid).create_time()
    call_started = max(psutil.boot_time() + 0.001, started - 30)
    assert started - call_started > 2  # the machine has been up for more than that
    assert reap_groups([(orphan_group.pid, call_started)]) == 0
    assert _alive(orphan_group)
