"""TETHER_HOME on a disk that fills up while a call runs, then has room again: what
could not be written while it was full is written once it can be, and the server
answers throughout. The home is a small tmpfs of its own (mounting it needs root)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from core_support import AppServer, FakeModel, Stack, open_gate, wait_for
from helpers import register_mock_provider

from tether.keeper import layout

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh 16 MiB tmpfs, unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


@pytest.fixture
def stack(small_disk: Path, tmp_path: Path) -> Iterator[Stack]:
    """A server (keeper on) whose home is on the small disk; its log is kept off it."""
    model = FakeModel()
    server = AppServer(
        small_disk / "home",
        {
            "TETHER_KEEPER": "1",
            "TETHER_LLM_MAX_RETRIES": "0",
            "TETHER_DEFAULT_APPROVAL_LEVEL": "off",
        },
    )
    server.log_path = tmp_path / "server.log"
    try:
        server.start()
        register_mock_provider(server, model.url)
        yield Stack(server, model)
    finally:
        server.close()
        model.close()


def _fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with one file; returns it (delete it to free)."""
    filler = disk / "filler"
    with filler.open("ab") as out:
        try:
            while True:
                out.write(b"\0" * (1 << 16))
                out.flush()
        except OSError:
            pass
    return filler


def _fill_for_the_database(disk: Path, database: Path) -> Path:
    """:func:`_fill`, with SQLite's write-ahead log emptied first: a log that has grown
    is written over from its start, so writes would still fit in it for a while."""
    _fill(disk)
    with closing(sqlite3.connect(database)) as db:
        wait_for(
            lambda: db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0,
            what="the database's log to be emptied",
        )
    return _fill(disk)


def test_a_task_that_ended_on_a_full_disk_finishes_once_there_is_room(
    stack: Stack, small_disk: Path
) -> None:
    """The task's result could not be stored, and it read ``running`` for good (until
    the next start), its call listed live, though the disk had room again."""
    session, task, call = stack.start_shell("while [ ! -e gate ]; do sleep 0.05; done")
    directory = layout.call_dir(stack.server.home, call["tool_call_id"])
    wait_for((directory / layout.SPEC_NAME).exists, what="the call to start under the runner")
    filler = _fill_for_the_database(small_disk, stack.server.home / "tether.db")
    open_gate(stack, "gate")  # an empty file: a full tmpfs still takes it
    ended = stack.wait_completed(session, call["tool_call_id"], timeout=30)
    # The runner could not write the call's status either: its end is lost.
    assert ended["end_state"] == "error", ended
    assert "could not record its end" in ended["extra"]["end_reason"], ended
    assert stack.task(task)["status"] != "finished"
    assert stack.api("GET", "/api/healthz").status_code == 200

    filler.unlink()
    finished = stack.wait_task(task, timeout=30)
    assert finished["result"]["status"] == "completed", finished
    assert stack.live_calls(session) == []
    stored = stack.call(session, call["tool_call_id"])
    assert stored["end_state"] == "error", stored
