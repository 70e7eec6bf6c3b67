"""The connection options of `tether cron` and `tether mcp` belong to the group: one given
after the subcommand is refused with where it goes, not click's bare "No such option"."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tether.cli import main


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["cron", "list", "--json"], "give it before the subcommand (tether cron --json list ...)"),
        (
            ["mcp", "rm", "some-key", "--token", "t0ken"],
            "give it before the subcommand (tether mcp --token TOKEN rm ...)",
        ),
        (
            ["cron", "pause", "job", "--url", "http://127.0.0.1:1"],
            "give it before the subcommand (tether cron --url URL pause ...)",
        ),
    ],
)
def test_a_group_option_after_the_subcommand_says_where_it_goes(args: list[str], hint: str) -> None:
    result = CliRunner().invoke(main, args, prog_name="tether")
    assert result.exit_code == 2
    assert hint in result.output
    assert "t0ken" not in result.output


def test_an_option_no_command_has_is_still_refused_as_unknown() -> None:
    result = CliRunner().invoke(main, ["cron", "list", "--bogus"], prog_name="tether")
    assert result.exit_code == 2
    assert "No such option" in result.output and "--bogus" in result.output
