"""Run by test_toolcalls_pid_reuse.py as process 1 of a pid namespace of its own, where
no process but its own takes pids, so the next pid can be chosen (``ns_last_pid``).

    python pid_reuse_probe.py local|runner HOME

A call's root exits, leaving a child that keeps its output open (so the call has not
ended) in a session of its own; once the call's group has no member left, a bystander
is started with the group's number as its pid, leading a group of its own; then the
call is stopped. Prints one JSON line: whether the bystander and the child are alive
after the stop. Process 1 only reaps (orphans come to it) until the probe, process 2,
exits; then it exits, and everything left in the namespace dies with it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from tether.keeper import client
from tether.keeper.client import KeeperClient
from tether.toolcalls.launcher import MARKER_VAR, LaunchSpec
from tether.toolcalls.local_launcher import LocalLauncher

MARKER = "pid-reuse-probe:call"
# The root leaves a child in a session of its own holding the call's output, and one in
# the call's group that outlives the root a little: the group empties after the reap.
COMMAND = "setsid sleep 30 & sleep 0.3 & exit 0"


def _until(probe: Callable[[], object], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def _group_empty(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _bystander_at(pid: int) -> subprocess.Popen[bytes]:
    """A process that is not the call's, given ``pid`` (so leading group ``pid``). A
    thread started between the choice and the fork takes the pid instead: try again."""
    for _ in range(5):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
        if bystander.pid == pid:
            return bystander
        bystander.kill()
        bystander.wait()
    raise SystemExit(f"no bystander got pid {pid}")


def _holder() -> int:
    """The call's child in a session of its own, once it runs ``sleep``."""
    found: list[int] = []

    def look() -> bool:
        for proc in psutil.process_iter():
            try:
                mine = proc.environ().get(MARKER_VAR) == MARKER
                if mine and proc.pid == os.getpgid(proc.pid) and proc.cmdline()[:1] == ["sleep"]:
                    found.append(proc.pid)
            except (psutil.Error, ProcessLookupError):
                continue
        return bool(found)

    _until(look, "the call's child")
    return found[0]


def _report(bystander: subprocess.Popen[bytes], holder: int) -> None:
    print(
        json.dumps({"bystander_alive": bystander.poll() is None, "holder_alive": not _gone(holder)})
    )


async def _local() -> None:
    launcher = LocalLauncher()
    spec = LaunchSpec(["/bin/sh", "-c", COMMAND], Path("/"), dict(os.environ), MARKER, time.time())
    tree = await launcher.start(spec)
    following = asyncio.ensure_future(tree.follow(lambda stream, text: None))
    await tree.wait()
    holder = _holder()
    await asyncio.to_thread(_until, lambda: _group_empty(tree.pgid), "the group to empty")
    bystander = _bystander_at(tree.pgid)
    await launcher.stop([tree], grace=0.5, force=True)
    _until(lambda: _gone(holder), "the stop", timeout=5.0)
    _report(bystander, holder)
    following.cancel()


async def _runner(home: Path) -> None:
    client.ensure_runner(home)
    keeper = KeeperClient(home)
    started = await keeper.request(
        "start",
        call_id="reused",
        argv=["/bin/sh", "-c", COMMAND],
        cwd="/",
        env={"PATH": os.environ["PATH"]},
        marker=MARKER,
        grace=0.5,
    )
    root = int(started["pid"])
    _until(lambda: _gone(root), "the root's exit")
    holder = _holder()
    _until(lambda: _group_empty(root), "the group to empty")
    bystander = _bystander_at(root)
    await keeper.request("signal", call_id="reused", force=True)
    _until(lambda: _gone(holder), "the stop", timeout=5.0)
    _report(bystander, holder)
    keeper.close()


def main() -> None:
    mode, home = sys.argv[1], Path(sys.argv[2])
    probe = os.fork()
    if probe == 0:
        asyncio.run(_local() if mode == "local" else _runner(home))
        sys.stdout.flush()
        os._exit(0)
    while True:
        pid, status = os.wait()
        if pid == probe:
            sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
