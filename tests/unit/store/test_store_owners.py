"""Owner ids: a server whose lock file is held is alive, one whose file nobody holds (or
that has no file) is gone; the directory sits beside a SQLite database."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.store.owners import OwnerLock, owners_directory

_HOLD = """
import fcntl, os, sys, uuid
directory = sys.argv[1]
owner = uuid.uuid4().hex[:16]
fd = os.open(os.path.join(directory, owner + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print(owner, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def other_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Another process holding an owner id in ``tmp_path``: (process, its id)."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            yield proc, proc.stdout.readline().strip()
        finally:
            proc.kill()


def test_a_live_owner_is_alive_and_a_dead_one_is_gone(
    tmp_path: Path, other_server: tuple[subprocess.Popen[str], str]
) -> None:
    proc, other = other_server
    me = OwnerLock.claim(tmp_path)
    try:
        assert me.dead_among([other, me.id]) == set()
        assert me.abandoned() == set()
        proc.kill()
        proc.wait()
        # The kernel dropped the lock with the process: its file proves it gone.
        assert me.dead_among([other, me.id]) == {other}
        assert me.abandoned() == {other}
        me.forget({other})
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"{me.id}.lock"]
    finally:
        me.release()
    assert list(tmp_path.iterdir()) == []


def test_owners_without_a_file_or_from_older_rows_are_gone(tmp_path: Path) -> None:
    me = OwnerLock.claim(tmp_path)
    try:
        assert me.dead_among([None, "0123456789abcdef", "../../etc/passwd"]) == {
            None,
            "0123456789abcdef",
            "../../etc/passwd",
        }
        me.forget(["../../etc/passwd"])  # never used as a path
    finally:
        me.release()


def test_a_second_claim_in_the_same_directory_gets_its_own_id(tmp_path: Path) -> None:
    first, second = OwnerLock.claim(tmp_path), OwnerLock.claim(tmp_path)
    try:
        assert first.id != second.id
        assert first.dead_among([second.id]) == set()
        assert first.marker_prefix != second.marker_prefix
    finally:
        first.release()
        second.release()


def test_the_directory_sits_beside_a_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'tether.db'}"
    beside = tmp_path / "data" / "tether.db.owners"
    assert owners_directory(url, tmp_path / "home") == (beside, True)
    memory = owners_directory("sqlite+aiosqlite:///:memory:", tmp_path)
    assert memory == (tmp_path / "owners", True)
    # Servers on another machine keep their files elsewhere: the directory is partial.
    remote = owners_directory("postgresql+asyncpg://h/db", tmp_path)
    assert remote == (tmp_path / "owners", False)


def test_with_a_partial_directory_only_a_free_lock_proves_an_owner_gone(
    tmp_path: Path, other_server: tuple[subprocess.Popen[str], str]
) -> None:
    proc, other = other_server
    me = OwnerLock.claim(tmp_path, complete=False)
    try:
        # No file here, or rows from before owners: maybe alive elsewhere, left alone.
        assert me.dead_among([None, "0123456789abcdef", other]) == set()
        proc.kill()
        proc.wait()
        assert me.dead_among([None, "0123456789abcdef", other]) == {other}
    finally:
        me.release()


def test_an_owner_that_leaves_work_for_a_successor_is_provably_gone(tmp_path: Path) -> None:
    # A detached stop (the keeper) leaves calls and tasks unfinished on purpose: the
    # next server must see that owner gone even where a missing file proves nothing.
    detached, clean = OwnerLock.claim(tmp_path), OwnerLock.claim(tmp_path)
    detached.release(left_unfinished=True)
    clean.release()
    successor = OwnerLock.claim(tmp_path, complete=False)
    try:
        assert successor.dead_among([detached.id, clean.id]) == {detached.id}
        assert successor.abandoned() == {detached.id}
        successor.forget({detached.id})
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"{successor.id}.lock"]
    finally:
        successor.release()
