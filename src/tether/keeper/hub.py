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

from tether.keeper import client, layout, protocol
from tether.keeper.client import KeeperClient, RunnerInfo, RunnerUnavailable
from tether.keeper.identity import ProcessIdentity

log = logging.getLogger(__name__)

_REVIVE_ATTEMPTS = 20
# How long a server waits for a runner on its way out to be gone.
_RETIRING_TIMEOUT = 15.0
# How long an idle runner asked to leave may take to exit.
_RETIRE_TIMEOUT = 10.0


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

    def __init__(self, home: Path, idle_exit: float | None = None) -> None:
        self.home = home
        #: What a runner this hub starts is told: exit after this long with no call
        #: and no connection (TETHER_KEEPER_IDLE_EXIT_SECONDS).
        self.idle_exit = idle_exit
        self.client = KeeperClient(home)
        self._signals: dict[str, CallSignal] = {}
        self._watching: asyncio.Task[None] | None = None
        self._reviving = asyncio.Lock()
        #: The runner being watched: a watch is taken again only from this very one.
        self._runner: ProcessIdentity | None = None
        #: The watch connection now followed.
        self.watch: client.Watch | None = None
        # Clear while one runner replaces another: requests wait for the new one.
        self._settled = asyncio.Event()
        self._settled.set()
        #: Replacements begun so far: a request cut by one is sent again (see request).
        self._swaps = 0

    async def open(self) -> RunnerInfo:
        """Start (or find) the runner, agree on a protocol with it and begin watching
        it; who it is (a runner of another version may speak no number we know: then
        nothing is watched, and :mod:`tether.keeper.startup` decides).

        A runner found on its way out (it retires when idle, and may be exiting just
        as this server arrives) is waited for and replaced: its socket, lock and
        ``runner.json`` go one after the other, so this tries again for a little
        while."""
        attempt = 1
        while True:
            try:
                return await self._open_once()
            except RunnerUnavailable:
                self.client.close()
                if attempt == _REVIVE_ATTEMPTS:
                    raise
                attempt += 1
                await asyncio.sleep(0.1)

    async def _open_once(self) -> RunnerInfo:
        await asyncio.to_thread(client.ensure_runner, self.home, self.idle_exit)
        info = await self.client.hello()
        if info.retiring:
            # It takes no new call; it leaves once its last one has ended (a SIGTERM'd
            # runner stops its calls first, within their grace).
            self.client.close()
            await asyncio.to_thread(client.wait_gone, info.identity, _RETIRING_TIMEOUT)
            raise RunnerUnavailable(f"the runner pid {info.identity.pid} was exiting")
        if info.spoken is not None:
            watch = await self.client.watch()
            self._runner = info.identity
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
            await self.open()

    async def retire(self, info: RunnerInfo) -> None:
        """Have the idle runner ``info`` exit and wait until it has."""
        await self.close()
        if info.spoken is not None:
            # It exits at once (it runs no call), perhaps before its answer is out.
            with contextlib.suppress(RunnerUnavailable):
                await self.client.request("retire")
            self.client.close()
            if await asyncio.to_thread(client.wait_gone, info.identity, _RETIRE_TIMEOUT):
                return
        # Speaking no protocol we know, or slow to go: SIGTERM stops what it runs (nothing).
        await asyncio.to_thread(client.stop_runner, self.home, _RETIRE_TIMEOUT)

    async def replace(self, info: RunnerInfo) -> RunnerInfo:
        """Put a runner of this version in the place of the idle runner ``info``.

        Every call the old one ran has ended and recorded its end, but an end's event
        may have been left unread on the old watch: the followers are sent to their
        files rather than left to their slow look. Requests made meanwhile wait for the
        new runner."""
        self._swaps += 1
        self._settled.clear()
        try:
            await self.retire(info)
            opened = await self.open()
        finally:
            self._settled.set()
        for found in self._signals.values():
            found.ended = True
            found.wake()
        return opened

    async def close(self) -> None:
        """Stop watching (the runner and its calls keep going)."""
        self.client.close()
        if self._watching is not None:
            self._watching.cancel()
            # Not ``await``: the watch's cancel is expected, a cancel of the caller must
            # go on up.
            await asyncio.wait({self._watching})
            if not self._watching.cancelled() and (error := self._watching.exception()):
                log.error("the runner's event stream had failed", exc_info=error)

    def signal_of(self, call_id: str) -> CallSignal:
        """The wake-up of ``call_id`` (created on first use)."""
        return self._signals.setdefault(call_id, CallSignal())

    def forget(self, call_id: str) -> None:
        """Nobody follows ``call_id`` any more."""
        self._signals.pop(call_id, None)

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """A request to the runner (see :class:`KeeperClient`). One cut by a replacement
        (the old runner's connection closed under it) is sent again to the new runner:
        the old one ran no call, so nothing the request asked of it can have happened."""
        await self._settled.wait()
        swaps = self._swaps
        try:
            return await self.client.request(op, **fields)
        except RunnerUnavailable:
            if self._swaps == swaps:
                raise
        await self._settled.wait()
        return await self.client.request(op, **fields)

    async def _follow(self, watch: client.Watch | None) -> None:
        while watch is not None:
            self.watch = watch
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
            watch = await self._watch_again()
        # The runner is gone: every follower must look at its files and find out
        # whether its call ended or was lost.
        log.warning("the runner of %s stopped answering", self.home)
        for found in self._signals.values():
            found.runner_gone = True
            found.wake()

    async def _watch_again(self) -> client.Watch | None:
        """A new event stream from the same runner, if it still answers: it drops a
        watcher whose events pile up unread (this server paused, or too busy during a
        burst of output), and its calls run on. Calls that ended meanwhile are found by
        their status files (their events went unread). None when the runner is gone."""
        try:
            info = await self.client.hello()
            if info.identity != self._runner or info.spoken is None:
                return None
            watch = await self.client.watch()
            listed = await self.client.request("list")
        except (OSError, ValueError, RunnerUnavailable, protocol.ProtocolError):
            return None
        running = {str(c.get("call_id")) for c in listed.get("calls", [])}
        quiet = [call_id for call_id in self._signals if call_id not in running]
        ended = await asyncio.to_thread(self._recorded_ends, quiet)
        log.warning(
            "the runner of %s dropped this server's event stream (events unread); "
            "watching it again",
            self.home,
        )
        for call_id, found in list(self._signals.items()):
            found.ended = found.ended or call_id in ended
            found.wake()
        return watch

    def _recorded_ends(self, call_ids: list[str]) -> set[str]:
        """Those of ``call_ids`` whose end the runner recorded (blocking); a status file
        that cannot even be looked at is read, and judged, by the call's follower."""
        ended = set()
        for call_id in call_ids:
            try:
                if (layout.call_dir(self.home, call_id) / layout.STATUS_NAME).exists():
                    ended.add(call_id)
            except OSError:
                ended.add(call_id)
        return ended
