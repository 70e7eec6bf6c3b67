"""The shell tool's own reading of the ``timeout`` argument a model or an MCP client
sends: anything that is not a positive, finite number of seconds means the default."""

from __future__ import annotations

from typing import Any

import pytest

from tether.tools.shell import make_shell_tool

DEFAULT = 60.0


@pytest.mark.parametrize(
    ("given", "taken"),
    [
        (5, 5.0),
        (2.5, 2.5),
        (None, DEFAULT),
        ("30", DEFAULT),
        (True, DEFAULT),
        (0, DEFAULT),
        (-3, DEFAULT),
        (float("nan"), DEFAULT),  # it passed "<= 0" and the call was killed at once
        (float("inf"), DEFAULT),
    ],
)
def test_the_timeout_argument(given: Any, taken: float) -> None:
    tool = make_shell_tool(DEFAULT, 3600.0, dict)
    args = {"command": "true"} if given is None else {"command": "true", "timeout": given}
    assert tool.timeout_of(args) == taken
