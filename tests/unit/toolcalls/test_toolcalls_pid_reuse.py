"""A stop that comes after a call's root was reaped and its group emptied, when the
group's number has become another process's pid and group, kills what is left of the
call and nothing of the other (pid_max is 32,768 on many machines: numbers come round
soon). Run in a pid namespace of its own (``pid_reuse_probe.py``), where the next pid
can be chosen, through both launchers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("pid_reuse_probe.py")


def _unshare() -> list[str]:
    """The command that runs one in a pid namespace (and /proc) of its own, with a user
    namespace too where we are not root; skip where the machine allows none (a
    container's default seccomp profile refuses them)."""
    unshare = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
    if os.geteuid() != 0:
        unshare.append("--map-root-user")
    tried = subprocess.run([*unshare, "true"], capture_output=True, text=True, check=False)
    if tried.returncode != 0:
        pytest.skip(f"no pid namespace here: {tried.stderr.strip()}")
    return unshare


def _probe(mode: str, home: Path) -> dict[str, bool]:
    unshare = _unshare()
    done = subprocess.run(
        [*unshare, sys.executable, str(PROBE), mode, str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, bool] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("mode", ["local", "runner"])
def test_a_stop_after_the_reap_spares_a_process_given_the_groups_number(
    mode: str, tmp_path: Path
) -> None:
    result = _probe(mode, tmp_path / "home")
    assert result == {"bystander_alive": True, "holder_alive": False}
