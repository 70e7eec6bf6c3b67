"""Reaping what a crashed server left: only groups recorded since the machine booted."""

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
