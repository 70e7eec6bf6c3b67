"""A long-lived server's command in the sandbox: the argv (pure), and the exec step that
joins the limits before the command runs (a real process)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tether.sandbox.bwrap import Confinement
from tether.sandbox.cgroup_v1 import CgroupV1Group
from tether.sandbox.cgroup_v2 import CgroupV2Group
from tether.sandbox.limits import MIB, Limits
from tether.sandbox.rlimits import RlimitGroup
from tether.sandbox.servers import enter_args, named_under_tmp, server_limits, wrap_server

ENTER = str(Path(__file__).parents[3] / "src" / "tether" / "sandbox" / "enter_limits.py")


def test_a_server_keeps_a_calls_memory_and_processes_but_no_cpu_limit() -> None:
    assert server_limits(Limits(512, 64, 30.0)) == Limits(512, 64, None)


def test_the_command_joins_its_group_then_runs_inside_bwrap(tmp_path: Path) -> None:
    group = CgroupV2Group(tmp_path / "call-x")
    conf = Confinement(tmp_path, (), tmp_path, network=False)
    wrapped = wrap_server("/usr/bin/bwrap", conf, group, ["node", "server.js"])
    argv = wrapped.argv
    assert argv[:4] == [sys.executable, "-I", "-S", ENTER]
    assert argv[4:6] == ["--procs", str(tmp_path / "call-x" / "cgroup.procs")]
    split = argv.index("--")
    assert argv[split + 1] == "/usr/bin/bwrap" and argv[-3:] == ["--", "node", "server.js"]
    assert "--unshare-net" in argv and not wrapped.network


def test_each_mechanism_says_how_to_join_it(tmp_path: Path) -> None:
    v1 = CgroupV1Group(tmp_path / "memory", tmp_path / "pids", None)
    assert enter_args(v1) == [
        "--procs",
        str(tmp_path / "memory" / "cgroup.procs"),
        "--procs",
        str(tmp_path / "pids" / "cgroup.procs"),
    ]
    rl = enter_args(RlimitGroup(Limits(100, 5, None), user_processes=7))
    assert rl[:2] == ["--rlimit", f"as={100 * MIB}"]
    if os.geteuid() != 0:
        assert rl[2:] == ["--rlimit", "nproc=12"]


def _enter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-S", ENTER, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_exec_step_sets_the_limits_and_becomes_the_command(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    procs.write_text("")
    size = 1024 * MIB
    show = "import os, resource; print(os.getpid(), resource.getrlimit(resource.RLIMIT_AS)[0])"
    done = _enter("--procs", str(procs), "--rlimit", f"as={size}", "--", sys.executable, "-c", show)
    assert done.returncode == 0, done.stderr
    pid, limit = done.stdout.split()
    # It exec'd (same pid as the one it wrote), under the limit it was given.
    assert procs.read_text() == pid and int(limit) == size


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--procs", "/x"], "no command after '--'"),
        (["--procs", "--", "true"], "every option takes a value"),
        (["--bogus", "1", "--", "true"], "unknown option '--bogus'"),
    ],
)
def test_the_exec_step_refuses_what_it_cannot_do(args: list[str], said: str) -> None:
    done = _enter(*args)
    assert done.returncode != 0 and said in done.stderr


def test_a_group_that_cannot_be_joined_stops_the_start(tmp_path: Path) -> None:
    done = _enter("--procs", str(tmp_path / "absent" / "cgroup.procs"), "--", "true")
    assert done.returncode != 0 and "FileNotFoundError" in done.stderr


def test_what_a_server_command_names_under_tmp_is_shown(tmp_path: Path) -> None:
    # A checkout and its virtual environment under /tmp, as CI or a user may have them.
    root = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        (root / "venv" / "bin").mkdir(parents=True)
        (root / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
        python = root / "venv" / "bin" / "python"
        python.write_text("")
        script = root / "tests" / "server.py"
        script.parent.mkdir()
        script.write_text("")
        state = root / "state"  # a directory the server is given to write in stays private
        state.mkdir()
        command = [str(python), str(script), "stdio", str(state), "relative.py", "/usr/bin/env"]
        assert named_under_tmp(command) == (root / "venv", root / "tests")
        assert named_under_tmp(["/usr/bin/python3", "-m", "server"]) == ()
    finally:
        shutil.rmtree(root)
