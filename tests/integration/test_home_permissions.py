"""A home this user cannot use (restored from a backup as another user, its modes lost,
mounted read-only): `tether serve` refuses with one line naming what and why, and exit
status 1, before it starts anything (no runner, no traceback)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from core_support import home_database, start_server

from tether.keeper import client as keeper_client
from tether.keeper import layout

pytestmark = pytest.mark.integration

# Root passes every permission check; without these capabilities it is held to the
# modes like anyone else.
_AS_ANYONE = (
    ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override"]
    if os.geteuid() == 0
    else []
)


@pytest.fixture(scope="module")
def used_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home a server has run in (its database, keys, call directory, runner log)."""
    home = tmp_path_factory.mktemp("used") / "home"
    server = start_server(home, **home_database(home))
    server.close()
    (home / "server.log").unlink()
    # The harness's servers are given their token; a home's own is kept in this file.
    (home / "token").write_text("a-token-of-forty-three-characters-or-so-xyz")
    (home / "token").chmod(0o600)
    yield home


def _serve(home: Path) -> subprocess.CompletedProcess[str]:
    return _tether(home, "serve", "--port", "0")


def _tether(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`tether <args>` on ``home``, as a user held to the modes; a runner it started
    anyway (`serve` did before it failed) is stopped after."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    try:
        return subprocess.run(
            [*_AS_ANYONE, sys.executable, "-m", "tether", *args],
            env={**clean, "TETHER_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        keeper_client.stop_runner(home)


def _refused_naming(home: Path, named: Path, needs: str) -> None:
    done = _serve(home)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: refusing to start: TETHER_HOME"), lines[0]
    assert f"{named} (mode 000, owner uid {os.geteuid()}) needs {needs}" in lines[0]
    assert not layout.runner_file(home).exists()


@pytest.mark.parametrize(
    ("name", "needs"),
    [
        ("tether.db", "read and write"),
        ("token", "read"),
        ("secret.key", "read"),
        ("runner.log", "read and write"),
        ("calls", "read and write and search"),
        ("tether.db.owners", "read and write and search"),
    ],
)
def test_a_file_of_mode_000_is_named_in_one_line(
    used_home: Path, tmp_path: Path, name: str, needs: str
) -> None:
    """Each of these gave a traceback (200 lines for the database), several after the
    runner had been started."""
    home = tmp_path / "home"
    shutil.copytree(used_home, home)
    (home / name).chmod(0)
    try:
        _refused_naming(home, home / name, needs)
    finally:
        (home / name).chmod(0o700)


def test_a_read_only_home_is_named_as_such(used_home: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(used_home, home)
    home.chmod(0o500)
    done = _serve(home)
    home.chmod(0o700)
    assert done.returncode == 1, done.stderr
    assert f"{home} (mode 500, owner uid {os.geteuid()}) needs read and write and search" in (
        done.stderr
    )


def test_a_usable_home_with_a_read_only_token_starts(used_home: Path, tmp_path: Path) -> None:
    """The token and the key are only read: an operator may make them read-only."""
    home = tmp_path / "home"
    shutil.copytree(used_home, home)
    (home / "token").chmod(0o400)
    server = start_server(home, **home_database(home))
    server.close()


@pytest.mark.parametrize(
    ("args", "doing"),
    [(["status"], "cannot show the status"), (["db", "upgrade"], "cannot upgrade the database")],
)
def test_the_other_commands_name_it_in_one_line_too(
    used_home: Path, tmp_path: Path, args: list[str], doing: str
) -> None:
    """Both gave a 200-line SQLAlchemy traceback ("unable to open database file")."""
    home = tmp_path / "home"
    shutil.copytree(used_home, home)
    (home / "tether.db").chmod(0)
    try:
        done = _tether(home, *args)
    finally:
        (home / "tether.db").chmod(0o600)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"Error: {doing}: TETHER_HOME {home}"), lines[0]
    assert f"{home / 'tether.db'} (mode 000" in lines[0]
