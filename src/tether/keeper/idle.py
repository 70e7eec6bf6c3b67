"""When a runner that nothing needs leaves.

A server leaves its runner behind on purpose while calls run, but a runner whose calls
have all ended and that no server uses any more is only a process nobody asked for (the
next server starts another in a fraction of a second). So, given ``seconds``, the
runner leaves once it has run no call and had no connection for that long.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class IdleExit:
    """Calls ``leave`` once ``busy()`` has been false for ``seconds`` (None: never)."""

    def __init__(
        self, seconds: float | None, busy: Callable[[], bool], leave: Callable[[], None]
    ) -> None:
        self.seconds = seconds
        self._busy = busy
        self._leave = leave
        self._timer: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        """Start counting, if nothing needs the runner now (again from zero)."""
        if self.seconds is None or self._busy():
            return
        self.disarm()
        self._timer = asyncio.get_running_loop().call_later(self.seconds, self._expired)

    def disarm(self) -> None:
        """Something needs the runner: stop counting."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self._busy():
            return
        log.info("no call and no server for %.0fs: the runner exits", self.seconds)
        self._leave()
