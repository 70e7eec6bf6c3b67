"""The HTTP server `tether serve` runs: uvicorn's, told of an exit at its first signal.

Uvicorn runs the application's shutdown only on a graceful exit. A second Ctrl-C while
it waits for connections to close (a request in progress) makes it skip that shutdown,
and ``asyncio.run`` then cancels whatever still runs: turns cancelled so would stop
their calls, which a detaching shutdown leaves running. So the application is told at
the first signal how the exit will treat its calls, whatever comes next.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from types import FrameType

import uvicorn

STARTUP_FAILURE = 3  # uvicorn's exit status when the server did not start


class SignalledServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, begin_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._begin_exit = begin_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            self._begin_exit()  # only sets flags: safe in a signal handler
        super().handle_exit(sig, frame)


def serve(config: uvicorn.Config, begin_exit: Callable[[], None]) -> None:
    """Run the server until it is asked to exit (as ``uvicorn.run`` does)."""
    server = SignalledServer(config, begin_exit)
    # Once shut down, uvicorn raises the SIGINT it caught again.
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
