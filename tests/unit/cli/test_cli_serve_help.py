"""`tether serve --help` names the variables its options stand in for: it said "default
8088" while TETHER_PORT, which the server reads, may say otherwise."""

from __future__ import annotations

from click.testing import CliRunner

from tether.cli import main


def test_serve_help_names_the_settings_behind_its_options() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    said = " ".join(result.output.split())
    assert "(default: TETHER_HOST, else 127.0.0.1)" in said
    assert "(default: TETHER_PORT, else 8088)" in said
    assert "also TETHER_LOG_LEVEL" in said and "also TETHER_NO_AUTH" in said
