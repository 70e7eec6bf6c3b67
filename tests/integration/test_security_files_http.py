"""File tools and the shell's cwd through the agent: no way out of the workspace, and
never into TETHER_HOME."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from security_support import (
    call_ids,
    call_info,
    finished_task,
    mock_model,
    output_text,
    submit,
    tool_reply,
    use_model,
)

pytestmark = [pytest.mark.integration, pytest.mark.p0]


def _run_calls(app_server: Any, *calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Have the model make ``calls`` in one step; each call's info and output."""
    with mock_model() as (model, url):
        use_model(app_server, url)
        model.replies = [tool_reply(*calls), {"text": "ok"}]
        task_id, session_id = submit(app_server, "try the files")
        task = finished_task(app_server, task_id)
        assert task["result"]["status"] == "completed", task
        sent = repr(model.requests)
    results = []
    for call_id in call_ids(app_server, session_id):
        info = call_info(app_server, session_id, call_id)
        info["output"] = output_text(app_server, session_id, call_id)
        info["model_saw"] = sent
        results.append(info)
    return results


def _refused(info: dict[str, Any], why: str) -> None:
    # Refused by the tool (error) or, first, by governance (denied): either way it
    # never ran on the forbidden path.
    assert info["end_state"] in ("error", "denied"), info
    if info["end_state"] == "error":
        assert why in info["extra"]["end_reason"], info


def test_symlink_out_of_the_workspace_is_refused(app_server: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = f"outside-canary-{uuid.uuid4().hex}"
    (outside / "notes.txt").write_text(canary)
    workspace = app_server.home / "workspace"
    link = workspace / f"escape-{uuid.uuid4().hex[:6]}"
    link.symlink_to(outside)
    read, write = _run_calls(
        app_server,
        ("read_file", {"path": f"{link.name}/notes.txt"}),
        ("write_file", {"path": f"{link.name}/planted.txt", "content": "x"}),
    )
    # Governance sees a path inside the workspace; the tool resolves the link and refuses.
    for info in (read, write):
        assert info["end_state"] == "error", info
        assert "outside the workspace" in info["extra"]["end_reason"]
    assert canary not in read["output"] + read["model_saw"]
    assert not (outside / "planted.txt").exists()


def test_tether_home_is_never_readable(app_server: Any) -> None:
    key = (app_server.home / "secret.key").read_text().strip()
    home = str(app_server.home)
    results = _run_calls(
        app_server,
        ("read_file", {"path": "../secret.key"}),
        ("read_file", {"path": f"{home}/secret.key"}),
        ("edit_file", {"path": "../tether.db", "old_text": "a", "new_text": "b"}),
        ("execute_shell_command", {"command": "cat secret.key", "cwd": ".."}),
        ("execute_shell_command", {"command": "ls", "cwd": home}),
    )
    assert len(results) == 5
    for info in results:
        _refused(info, "Tether's own state")
        assert key not in info["output"]
    assert key not in results[0]["model_saw"]
    # Governance refuses most of these first; the shell's cwd is refused by the tool.
    assert results[-1]["end_state"] == "error", results[-1]
    link = app_server.home / "workspace" / f"home-{uuid.uuid4().hex[:6]}"
    link.symlink_to(app_server.home)
    (via_link,) = _run_calls(app_server, ("read_file", {"path": f"{link.name}/secret.key"}))
    _refused(via_link, "Tether's own state")
    assert key not in via_link["output"] + via_link["model_saw"]


def test_the_workspace_itself_works(app_server: Any) -> None:
    name = f"ok-{uuid.uuid4().hex[:6]}.txt"
    write, read = _run_calls(
        app_server,
        ("write_file", {"path": name, "content": "hello"}),
        ("execute_shell_command", {"command": "pwd", "cwd": "."}),
    )
    assert write["end_state"] == "success", write
    assert (app_server.home / "workspace" / name).read_text() == "hello"
    assert read["end_state"] == "success", read
    assert read["output"].strip() == str((app_server.home / "workspace").resolve())
