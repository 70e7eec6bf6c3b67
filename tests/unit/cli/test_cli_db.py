"""`tether db upgrade` where there is no database: it says so and makes none."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tether.cli import main


def test_upgrade_of_a_home_with_no_database_says_so_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "mistyped"
    result = CliRunner().invoke(
        main, ["db", "upgrade"], env={"TETHER_HOME": str(home), "TETHER_DATABASE_URL": None}
    )
    assert result.exit_code == 1
    assert f"no database at {home / 'tether.db'}: nothing to upgrade" in result.output
    assert not home.exists()
