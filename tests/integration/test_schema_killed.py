"""A first start, or `tether db upgrade`, killed (SIGKILL) while it makes the schema: the
database is left as it was before, and the next start (or upgrade) goes on from there."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from core_support import AppServer, home_database

pytestmark = pytest.mark.integration

# Runs `tether <args>` and kills itself (SIGKILL) once it has created the number of
# tables given first: in the middle of the schema, as a crash or the OOM killer would.
_KILLED_MIDWAY = """
import os, signal, sys
import sqlalchemy as sa
from tether.cli import main

created = 0

@sa.event.listens_for(sa.engine.Engine, "after_cursor_execute")
def _kill_midway(conn, cursor, statement, *rest):
    global created
    if statement.lstrip().upper().startswith("CREATE TABLE"):
        created += 1
        if created == int(sys.argv[1]):
            os.kill(os.getpid(), signal.SIGKILL)

main(sys.argv[2:])
"""


def _tables(database: Path) -> set[str]:
    with closing(sqlite3.connect(database)) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in rows}


@pytest.mark.parametrize("killed", [["db", "upgrade"], ["serve", "--port", "0"]])
def test_a_schema_killed_half_made_is_not_left_half_made(tmp_path: Path, killed: list[str]) -> None:
    """Each table was committed as it was made: the next start refused the database as
    one "from before Alembic", and `tether db upgrade` failed on the first table (it
    exists): no way on but deleting the database."""
    home = tmp_path / "home"
    server = AppServer(home, home_database(home))
    server.home.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_MIDWAY, "5", *killed],
        env=server._env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert _tables(server.home / "tether.db") == set()

    upgraded = subprocess.run(
        [sys.executable, "-m", "tether", "db", "upgrade"],
        env=server._env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert upgraded.returncode == 0, upgraded.stderr
    assert "schema is up to date" in upgraded.stdout
    server.start()
    server.close()
