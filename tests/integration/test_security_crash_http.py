"""Crash safety: SIGKILL the server in the middle of a turn, restart it, and find the
history intact, the task failed, the call recorded as interrupted and no process left.

With calls as the server's children (TETHER_KEEPER=0): this is the parent-death signal
and the next start's reaping. Under the keeper (the default) the call would survive
the crash and be adopted, as test_keeper_restart.py shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest
from security_support import (
    call_ids,
    call_info,
    mock_model,
    start_server,
    submit,
    tool_reply,
    use_model,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.p0]


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody has reaped yet."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pid_in(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def _messages(server: Any, session_id: str) -> list[dict[str, Any]]:
    resp = server.api_request("GET", f"/api/chats/{session_id}/messages")
    assert resp.status_code == 200, resp.text
    messages: list[dict[str, Any]] = resp.json()
    return messages


def test_kill_9_mid_turn_then_restart(tmp_path: Path) -> None:
    shell_pid_file, child_pid_file = tmp_path / "shell.pid", tmp_path / "child.pid"
    daemon_pid_file = tmp_path / "daemon.pid"
    # The shell records itself, starts a grandchild in its process group and a daemon
    # that leaves its session and clears its environment (no group, parent or marker
    # leads to it: only the call's limits group), and waits.
    daemon = f"setsid env -i sh -c 'echo $$ > {daemon_pid_file}; exec sleep 300' &"
    command = f"echo $$ > {shell_pid_file}; {daemon} sleep 300 & echo $! > {child_pid_file}; wait"
    # Unsandboxed and without the keeper: this is the parent-death signal and
    # process-group reaping of a plain shell call (test_sandbox covers a sandboxed call
    # dying with the server), and the command writes outside the workspace.
    server = start_server(tmp_path / "home", TETHER_SANDBOX="off", TETHER_KEEPER="0")
    child_pid = daemon_pid = None
    try:
        with mock_model() as (model, url):
            use_model(server, url)
            model.replies = [
                tool_reply(("execute_shell_command", {"command": command, "timeout": 600}))
            ]
            task_id, session_id = submit(server, "run something long")
            shell_pid = wait_for(lambda: _pid_in(shell_pid_file), what="the shell to start")
            child_pid = wait_for(lambda: _pid_in(child_pid_file), what="its child to start")
            daemon_pid = wait_for(lambda: _pid_in(daemon_pid_file), what="the daemon to start")
            (call_id,) = call_ids(server, session_id)
            assert call_info(server, session_id, call_id)["status"] == "running"
            before = _messages(server, session_id)
            assert [m["kind"] for m in before] == ["user", "assistant"]

            server.kill()

        # The shell dies with the server (parent-death signal), without any restart.
        wait_for(lambda: not _alive(shell_pid), 10, "the shell to die with the server")
        # Its child, in the same process group, and the daemon, in the call's limits
        # group, are only reaped by the next start.
        assert _alive(child_pid) and _alive(daemon_pid)

        server.start()

        wait_for(lambda: not _alive(child_pid), 10, "start-up to reap the orphan")
        wait_for(lambda: not _alive(daemon_pid), 10, "start-up to reap the daemon")
        after = _messages(server, session_id)
        assert after[: len(before)] == before
        task = server.api_request("GET", f"/api/console/chat/task/{task_id}").json()
        assert task["status"] == "finished"
        assert task["result"] == {
            "status": "failed",
            "error": {"message": "server restarted"},
            "session_id": session_id,
        }
        info = call_info(server, session_id, call_id)
        assert info["status"] == "completed"
        assert info["end_state"] == "cancelled"
        assert info["extra"]["end_reason"] == "server restarted"
        listed = server.api_request("GET", f"/api/tool-calls/{session_id}").json()
        assert listed["total"] == 0
        assert server.api_request("GET", "/api/chats").json()[0]["status"] == "idle"
    finally:
        server.close()
        for pid in (child_pid, daemon_pid):
            if pid is not None and _alive(pid):
                psutil.Process(pid).kill()
