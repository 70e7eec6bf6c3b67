"""Who may talk to a runner (the sandboxed case is in test_keeper_runner.py, with a real
bubblewrap)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tether.keeper import peers


def test_a_process_of_the_runners_user_and_namespace_may() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert peers.refusal(a) is None


def test_another_user_may_not(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = socket.socketpair()
    with a, b:
        if os.geteuid() == 0:
            # The peer is root, whom a runner of any user takes: pretend to be another.
            monkeypatch.setattr(os, "geteuid", lambda: 12345)
            assert peers.refusal(a) is None
        else:
            monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
            assert "runs as uid" in (peers.refusal(a) or "")


def _taking_pid(pid: int) -> subprocess.Popen[bytes]:
    """A process of this namespace started under the number ``pid`` (root writes the
    namespace's last pid, as checkpoint/restore tools do; others on the machine may
    take the number first, so it is tried again)."""
    last_pid = Path("/proc/sys/kernel/ns_last_pid")
    for _ in range(100):
        last_pid.write_text(str(pid - 1))
        proc = subprocess.Popen(["sleep", "60"])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    raise AssertionError(f"could not start a process as pid {pid}")


@pytest.mark.skipif(os.geteuid() != 0, reason="taking a given pid needs root")
def test_a_peer_that_exited_is_refused_even_with_its_number_taken(tmp_path: Path) -> None:
    """A peer in another pid namespace (a sandboxed call) connects and exits; a process
    of the runner's namespace takes its number. Read by number, the peer looked like
    that process and was let in; read through its pidfd, it has exited."""
    path = tmp_path / "runner.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        connect = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r})"
        subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c", connect], check=True)
        conn, _ = listener.accept()
        with conn:
            pid, _, _ = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            )
            taker = _taking_pid(pid)
            try:
                assert peers.refusal(conn) == "the peer has exited"
            finally:
                taker.kill()
                taker.wait()
