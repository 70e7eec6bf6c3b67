"""The server's link to its runner: requests, and one watch connection whose events
wake whoever follows a call.

Events only say *that* something changed (a call's output grew, a call ended); what
changed is read from the call's files, so a missed event costs a wake-up, never data.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.keeper import client
from tether.keeper.client import KeeperClient, RunnerInfo, RunnerUnavailable

log = logging.getLogger(__name__)

_REVIVE_ATTEMPTS = 20


@dataclass
class CallSignal:
    """Wakes the followers of one call: its latest output position and whether it
    ended (or its runner went away, which the files then have to explain)."""

    ended: bool = False
    runner_gone: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def wake(self) -> None:
        """Wake everyone waiting on ``changed`` (take it before reading, then await)."""
        self.changed.set()
        self.changed = asyncio.Event()


class KeeperHub:
    """One per server: makes sure a runner serves the home and routes its events."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.client = KeeperClient(home)
        self._signals: dict[str, CallSignal] = {}
        self._watching: asyncio.Task[None] | None = None
        self._reviving = asyncio.Lock()

    async def open(self) -> RunnerInfo:
        """Start (or find) the runner, agree on a protocol with it and begin watching
        it; who it is (a runner of another version may speak no number we know: then
        nothing is watched, and :mod:`tether.keeper.startup` decides)."""
        await asyncio.to_thread(client.ensure_runner, self.home)
        info = await self.client.hello()
        if info.spoken is not None:
            watch = await self.client.watch()
            self._watching = asyncio.create_task(self._follow(watch))
        return info

    async def revive(self) -> None:
        """After the runner died: start a new one and watch it (the old one's calls
        are lost; their followers were told so)."""
        async with self._reviving:
            if self._watching is not None and not self._watching.done():
                return  # another caller revived it already
            log.warning("starting a new runner for %s", self.home)
            self.client.close()
            # The old runner may still be exiting (its socket already closed, its lock
            # and runner.json not yet released): try again for a little while.
            for attempt in range(_REVIVE_ATTEMPTS):
                try:
                    await self.open()
                    return
                except RunnerUnavailable:
                    if attempt == _REVIVE_ATTEMPTS - 1:
                        raise
                    await asyncio.sleep(0.1)

    async def close(self) -> None:
        """Stop watching (the runner and its calls keep going)."""
        self.client.close()
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching

    def signal_of(self, call_id: str) -> CallSignal:
        """The wake-up of ``call_id`` (created on first use)."""
        return self._signals.setdefault(call_id, CallSignal())

    def forget(self, call_id: str) -> None:
        """Nobody follows ``call_id`` any more."""
        self._signals.pop(call_id, None)

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """A request to the runner (see :class:`KeeperClient`)."""
        return await self.client.request(op, **fields)

    async def _follow(self, watch: client.Watch) -> None:
        try:
            async for event in watch:
                found = self._signals.get(str(event.get("call_id")))
                if found is None:
                    continue
                if event.get("event") == "ended":
                    found.ended = True
                found.wake()
        except (OSError, ValueError, RunnerUnavailable):
            log.exception("lost the runner's event stream")
        finally:
            watch.close()
        # The runner is gone (or closed on us): every follower must look at its files
        # and find out whether its call ended or was lost.
        log.warning("the runner of %s stopped answering", self.home)
        for found in self._signals.values():
            found.runner_gone = True
            found.wake()
