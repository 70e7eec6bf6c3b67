"""The event loop's reports of refused connections, cut to one line now and then.

Out of file descriptors (``ulimit -n`` reached: many streams, many calls), Python
3.11's asyncio reports a refused ``accept`` with a traceback, goes on to the next
queued connection (up to the listener's backlog) and schedules a retry for each
refusal, so the reports multiply: a server with 150 connections queued logged 140,000
lines in 8 seconds (megabytes a second, on the disk its log is on). The connections
wait in the queue meanwhile and are taken once descriptors are free; what the operator
needs is one line saying so, and the limit.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

log = logging.getLogger(__name__)

_REFUSED = "socket.accept() out of system resource"
#: Seconds between two lines about refused connections.
QUIET = 10.0


class LoopErrors:
    """An event loop's exception handler: refused accepts are counted and said at most
    once every ``quiet`` seconds; anything else goes to the handler it replaces."""

    def __init__(self, loop: asyncio.AbstractEventLoop, quiet: float = QUIET) -> None:
        self._previous = loop.get_exception_handler()
        self._quiet = quiet
        self._said_at: float | None = None
        self._unsaid = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == _REFUSED:
            self._refused(context.get("exception"))
        elif self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)

    def _refused(self, exc: object) -> None:
        self._unsaid += 1
        now = time.monotonic()
        if self._said_at is not None and now - self._said_at < self._quiet:
            return
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        log.error(
            "cannot accept connections: %s (this process may hold %d descriptors: its "
            "ulimit -n); %d attempt(s) refused since this was last said; the connections "
            "wait until descriptors are free (said at most every %.0f s)",
            why,
            soft,
            self._unsaid,
            self._quiet,
        )
        self._said_at, self._unsaid = now, 0


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Make :class:`LoopErrors` the loop's exception handler."""
    loop.set_exception_handler(LoopErrors(loop))
