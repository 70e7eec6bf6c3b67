"""Limit mechanisms: finding cgroup v1 and v2 from /proc's view, reading a group's files,
and (where this machine allows) a real group around a real process."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tether.sandbox import cgroup_v1, cgroup_v2, enforcers
from tether.sandbox.groups import CallGroup
from tether.sandbox.limits import MIB, Limits
from tether.sandbox.rlimits import Rlimits
from tether.sandbox.watch import kill_group

V1_CGROUP = "8:pids:/\n4:memory:/jobs/abc\n2:cpu,cpuacct:/\n0::/\n"
V1_MOUNTS = (
    "cgroup {root}/memory cgroup rw,relatime,memory 0 0\n"
    "cgroup {root}/pids cgroup rw,relatime,pids 0 0\n"
    "cgroup {root}/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\n"
)


def _files(directory: Path, **contents: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in contents.items():
        (directory / name.replace("__", ".")).write_text(text)


def test_v1_paths_and_mounts_are_read_per_controller(tmp_path: Path) -> None:
    assert cgroup_v1.own_paths(V1_CGROUP)["memory"] == "/jobs/abc"
    assert cgroup_v1.own_paths(V1_CGROUP)["cpuacct"] == "/"
    points = cgroup_v1.mount_points(V1_MOUNTS.format(root=tmp_path))
    assert points["memory"] == tmp_path / "memory"
    assert points["cpuacct"] == tmp_path / "cpu,cpuacct"


def test_v1_detects_needs_memory_and_pids_and_reads_a_group(tmp_path: Path) -> None:
    for sub in ("memory/jobs/abc", "pids", "cpu,cpuacct"):
        (tmp_path / sub).mkdir(parents=True)
    enforcer = cgroup_v1.detect(V1_CGROUP, V1_MOUNTS.format(root=tmp_path), "tether-t")
    assert enforcer is not None and enforcer.mechanism == "cgroup1"
    memory = tmp_path / "memory/jobs/abc/tether-t/call-1"
    pids = tmp_path / "pids/tether-t/call-1"
    _files(
        memory,
        memory__limit_in_bytes="",
        memory__max_usage_in_bytes="5000",
        memory__usage_in_bytes="4000",
        memory__oom_control="oom_kill_disable 0\noom_kill 1\n",
        cgroup__procs="",
    )
    _files(pids, pids__max="", pids__current="3", pids__events="max 0\n", cgroup__procs="12\n13\n")
    _files(tmp_path / "cpu,cpuacct/tether-t/call-1", cpuacct__usage="2500000000")
    group = enforcer.create("call-1", Limits(256, 64, None))
    assert (memory / "memory.limit_in_bytes").read_text() == str(256 * MIB)
    assert (pids / "pids.max").read_text() == "64"
    usage = group.read()
    assert (usage.peak_memory_bytes, usage.processes, usage.cpu_seconds) == (5000, 3, 2.5)
    assert usage.memory_killed and not usage.processes_refused
    assert group.members() == [12, 13]
    # Without pids (or memory) there is no v1 enforcer.
    only_memory = V1_MOUNTS.format(root=tmp_path).splitlines()[0]
    assert cgroup_v1.detect(V1_CGROUP, only_memory, "tether-u") is None


def test_v2_needs_delegated_memory_and_pids(tmp_path: Path) -> None:
    mounts = f"cgroup2 {tmp_path} cgroup2 rw 0 0\n"
    base = tmp_path / "svc"
    _files(base, cgroup__controllers="cpu io memory", cgroup__subtree_control="")
    assert cgroup_v2.detect("0::/svc\n", mounts, "tether-t") is None
    _files(base, cgroup__controllers="cpu memory pids", cgroup__subtree_control="memory pids")
    _files(base / "tether-t", cgroup__subtree_control="")
    enforcer = cgroup_v2.detect("0::/svc\n", mounts, "tether-t")
    assert enforcer is not None and enforcer.mechanism == "cgroup2"
    call = base / "tether-t/call-1"
    _files(
        call,
        memory__max="",
        pids__max="",
        memory__peak="7000",
        memory__current="10",
        cpu__stat="usage_usec 1500000\nuser_usec 1\n",
        pids__current="2",
        pids__events="max 4\n",
        memory__events="oom 0\noom_kill 0\n",
        cgroup__procs="",
    )
    group = enforcer.create("call-1", Limits(None, 100, None))
    assert (call / "memory.max").read_text() == "max"
    usage = group.read()
    assert (usage.peak_memory_bytes, usage.cpu_seconds) == (7000, 1.5)
    assert usage.processes_refused and not usage.memory_killed


@contextlib.contextmanager
def _child(group: CallGroup, script: str) -> Iterator[subprocess.Popen[str]]:
    """A Python child started under ``group``, killed and reaped afterwards."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        preexec_fn=group.join,
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def _real_enforcer(tag: str = "") -> cgroup_v1.CgroupV1 | cgroup_v2.CgroupV2 | None:
    enforcer = enforcers.choose(tag or f"tether-unit-{uuid.uuid4().hex[:8]}")
    return None if isinstance(enforcer, Rlimits) else enforcer  # type: ignore[return-value]


def test_a_real_group_counts_and_kills_its_processes() -> None:
    enforcer = _real_enforcer()
    if enforcer is None:
        pytest.skip("no writable cgroup hierarchy here")
    group = enforcer.create("call-unit", Limits(256, 16, None))
    with _child(group, "import time; time.sleep(60)") as proc:
        assert proc.pid in group.members()
        usage = group.read()
        assert usage.processes == 1 and (usage.memory_bytes or 0) > 0
        kill_group(group, proc.pid)
        assert proc.wait(10) < 0
    assert group.close()
    enforcer.close()


def test_only_a_reaping_choice_kills_what_a_dead_runs_group_holds() -> None:
    tag = f"tether-unit-{uuid.uuid4().hex[:8]}"
    enforcer = _real_enforcer(tag)
    if enforcer is None:
        pytest.skip("no writable cgroup hierarchy here")
    group = enforcer.create("call-left", Limits(256, 64, None))
    # What a dead run's call left: a process that keeps forking, and one that left its
    # session and cleared its environment (nothing but the group still knows it).
    script = "setsid env -i sleep 300 & while :; do sleep 300 & sleep 0.01; done"
    argv = group.join_command(["/bin/sh", "-c", script])
    assert argv is not None
    root = subprocess.Popen(argv, start_new_session=True)
    try:
        for _ in range(500):
            if len(group.members()) >= 4:
                break
            root.poll()
            time.sleep(0.01)
        assert len(group.members()) >= 4
        enforcers.choose(tag)  # a look without the lock: the busy group stays
        assert group.members()
        enforcers.choose(tag, reap=True)
        assert root.wait(10) < 0
        assert not [p for p in group.members() if psutil.pid_exists(p)]
        assert not any(Path(parent, "call-left").exists() for parent in enforcer.parents)
    finally:
        with contextlib.suppress(ProcessLookupError):
            root.kill()
        root.wait()
        kill_members_everywhere(enforcer, "call-left")
        enforcer.close()


def kill_members_everywhere(enforcer: cgroup_v1.CgroupV1 | cgroup_v2.CgroupV2, name: str) -> None:
    from tether.sandbox.groups import kill_members

    for parent in enforcer.parents:
        if (Path(parent) / name).is_dir():
            kill_members(Path(parent) / name)
            with contextlib.suppress(OSError):
                (Path(parent) / name).rmdir()


def test_rlimits_are_the_last_resort_and_apply_in_the_child() -> None:
    group = Rlimits().create("call-r", Limits(512, 64, 2.5))
    script = (
        "import resource as r; print(r.getrlimit(r.RLIMIT_AS)[0], r.getrlimit(r.RLIMIT_CPU)[0]);"
        "import sys; sys.stdout.flush(); import time; time.sleep(60)"
    )
    with _child(group, script) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == [str(512 * MIB), "3"]
        group.attach(proc.pid)
        usage = group.read()
        assert usage.processes == 1 and (usage.peak_memory_bytes or 0) > 0
        kill_group(group, proc.pid)
        assert proc.wait(10) < 0
    assert group.close()


def test_the_join_step_puts_the_command_in_the_group_before_it_runs() -> None:
    enforcer = _real_enforcer()
    if enforcer is None:
        pytest.skip("no writable cgroup hierarchy here")
    group = enforcer.create("call-join", Limits(256, 16, None))
    # The command reads its own membership: it is in the group from its first line.
    argv = group.join_command([sys.executable, "-c", "print(open('/proc/self/cgroup').read())"])
    assert argv is not None
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    assert "call-join" in done.stdout
    assert group.close()
    enforcer.close()


def test_a_refused_join_never_runs_the_command(tmp_path: Path) -> None:
    from tether.sandbox.groups import join_by_shell

    ran = tmp_path / "ran"
    argv = join_by_shell([tmp_path / "no" / "tasks"], ["/bin/sh", "-c", f"touch {ran}"])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 125
    assert "tasks" in done.stderr
    assert not ran.exists()
