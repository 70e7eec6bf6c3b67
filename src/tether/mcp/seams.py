"""What a client connection is built with: its pacing, and the sandbox's wrapper.

Apart from ``connection.py`` so that building the MCP service, which every start does,
does not import the MCP SDK; that waits until a client is configured.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tether.mcp.spec import SandboxNetwork


@dataclass(frozen=True)
class Timing:
    """How the supervisor paces itself (tests shorten these)."""

    connect_timeout: float = 30.0
    ping_interval: float = 5.0
    backoff_first: float = 1.0
    backoff_max: float = 60.0


class WrappedServer(Protocol):
    """A stdio server's command as the sandbox rewrote it."""

    argv: list[str]

    def release(self) -> None:
        """Free what the wrapping held, once the server has ended (blocking)."""


# The sandbox's seam (``Sandbox.wrap_server``): the command to run instead, or None when
# the sandbox does not work here.
ServerWrapper = Callable[
    [Sequence[str], Path, SandboxNetwork | None], Awaitable[WrappedServer | None]
]
