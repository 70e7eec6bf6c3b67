"""What start-up and `tether status` make of the calls a previous server left."""

from __future__ import annotations

from pathlib import Path

from tether.keeper import layout
from tether.keeper.inventory import call_directories, survey
from tether.keeper.status import CallEnd, CallSpec, write_end, write_spec
from tether.store.records import ToolCallRecord


def record(call_id: str, status: str = "running") -> ToolCallRecord:
    return ToolCallRecord(
        id=call_id,
        session_id="s",
        task_id="t",
        agent_id="default",
        tool_name="execute_shell_command",
        arguments={"command": "sleep 1"},
        status=status,
        end_state=None,
        end_reason=None,
        force_cancelled=False,
        offload_reason=None,
        max_timeout=60.0,
        result=None,
        started_at=1.0,
        finished_at=None,
    )


def files(home: Path, call_id: str, pid: int = 100, end: CallEnd | None = None) -> Path:
    directory = layout.call_dir(home, call_id)
    directory.mkdir(parents=True)
    spec = CallSpec(call_id, ["/bin/sh", "-c", "x"], "/", pid, 5.0, "m", 1.0, None, None)
    write_spec(directory, spec)
    if end is not None:
        write_end(directory, end)
    return directory


def test_each_call_is_classified(tmp_path: Path) -> None:
    files(tmp_path, "alive", pid=100)
    files(tmp_path, "done", end=CallEnd(0, None, 2.0, None, 0))
    files(tmp_path, "orphan")  # no end, not run by the runner: its runner died
    files(tmp_path, "reused", pid=200)  # the runner runs a call of that id, other pid
    files(tmp_path, "stray", pid=300)  # the runner runs it; the database has no row
    rows = [record(c) for c in ("alive", "done", "orphan", "reused", "never")]
    running = {
        "alive": {"pid": 100},
        "reused": {"pid": 999},
        "stray": {"pid": 300},
    }
    found = {f.call_id: f for f in survey(tmp_path, rows, running, call_directories(tmp_path))}
    assert {k: f.fate for k, f in found.items()} == {
        "alive": "running",
        "done": "ended",
        "orphan": "lost",
        "reused": "lost",
        "never": "not_kept",
        "stray": "no_row",
    }
    assert found["done"].end == CallEnd(0, None, 2.0, None, 0)
    assert "its exit status is lost" in (found["orphan"].problem or "")
    assert "999" in (found["reused"].problem or "")
    assert found["reused"].runner_pid == 999  # the runner is asked to stop its call
    assert found["orphan"].runner_pid is None


def test_a_corrupt_spec_of_a_call_the_runner_runs_names_the_file_and_the_pid(
    tmp_path: Path,
) -> None:
    directory = files(tmp_path, "bad", pid=100)
    (directory / layout.SPEC_NAME).write_text('{"call_id": "bad", "kill_at": "soon"}')
    [found] = survey(tmp_path, [record("bad")], {"bad": {"pid": 100}}, ["bad"])
    assert (found.fate, found.runner_pid) == ("lost", 100)
    assert str(directory / layout.SPEC_NAME) in (found.problem or "")


def test_a_corrupt_status_file_is_a_lost_call_naming_the_file(tmp_path: Path) -> None:
    directory = files(tmp_path, "bad")
    (directory / layout.STATUS_NAME).write_text("{not json")
    [found] = survey(tmp_path, [record("bad")], {}, ["bad"])
    assert found.fate == "lost"
    assert str(directory / layout.STATUS_NAME) in (found.problem or "")


def test_a_calls_path_that_is_a_file_loses_the_calls_saying_so(tmp_path: Path) -> None:
    layout.calls_dir(tmp_path).write_text("not a directory")
    [found] = survey(tmp_path, [record("gone")], {}, [])
    assert found.fate == "lost"
    assert "Not a directory" in (found.problem or "")


def test_a_call_awaiting_approval_has_not_started_and_is_not_lost(tmp_path: Path) -> None:
    # It was "not_kept", "its process and output are lost": it never had either.
    rows = [record("asks", status="awaiting_approval")]
    [found] = survey(tmp_path, rows, {}, call_directories(tmp_path))
    assert (found.fate, found.problem, found.spec) == ("awaiting_approval", None, None)


def test_a_call_whose_spec_was_never_written_is_lost_naming_the_file(tmp_path: Path) -> None:
    """It read "not_kept" ("it was not started under the keeper"), and the runner's
    process of it, if it ran, was left running with nobody following it."""
    for call_id in ("ran", "runs"):
        layout.call_dir(tmp_path, call_id).mkdir(parents=True)
        (layout.call_dir(tmp_path, call_id) / layout.OUTPUT_NAME).touch()
    rows = [record("ran"), record("runs")]
    found = {
        f.call_id: f
        for f in survey(tmp_path, rows, {"runs": {"pid": 100}}, call_directories(tmp_path))
    }
    for call_id, runner_pid in (("ran", None), ("runs", 100)):
        assert (found[call_id].fate, found[call_id].runner_pid) == ("lost", runner_pid)
        spec_path = layout.call_dir(tmp_path, call_id) / layout.SPEC_NAME
        assert f"{spec_path} was never written" in (found[call_id].problem or "")
