"""Stopping many calls' trees together: one scan of the process table per batch.

Finding a tree means scanning every process (the environment marker finds setsid'd
orphans), so stopping 1,000 calls one by one would scan 1,000 times. Requests that
arrive while a scan runs wait and go together in the next one.

A call in a limits group is found from its group, which is cheap; once its grace is over,
one last look by marker finds what a service manager may have moved out of the group.
That look reads the environment of every young process, so it is shared the same way:
the calls whose graces end while one look runs go together in the next. (One look per
stop made 100 stops of 10 calls each take 40 s instead of a few: the runner's loop
starved behind the scans.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from tether.toolcalls import process_tree
from tether.waits import event_within

log = logging.getLogger(__name__)

#: The last look waits until no grace has ended for this long (stops that come in a
#: burst end their graces in a burst, and one look then serves them all) ...
SWEEP_QUIET = 0.5
#: ... but never longer than this after the first of them.
SWEEP_LATEST = 5.0


class Stoppable(Protocol):
    """A call whose tree can be found."""

    @property
    def call_id(self) -> str: ...

    def target(self) -> process_tree.Target: ...


class TreeStopper:
    """SIGTERM to each tree, SIGKILL to what is left after ``grace`` (``force``: SIGKILL
    at once)."""

    def __init__(self, grace: float) -> None:
        self._grace = grace
        # Per call: force, and the era it was asked in (see hurry).
        self._pending: dict[str, tuple[Stoppable, bool, int]] = {}
        self._busy = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._era = 0
        self._hurried = asyncio.Event()
        # Grouped calls due for the last look by marker, when the last of them became
        # due (loop time), and whether a look runs.
        self._unswept: list[Stoppable] = []
        self._last_due = 0.0
        self._sweeping = False
        # Hurried once: the runner is leaving, and the last looks no longer wait.
        self._leaving = False

    def request(self, call: Stoppable, force: bool) -> None:
        """Stop ``call``'s tree soon (with the calls asked for meanwhile)."""
        _, forced, _ = self._pending.get(call.call_id, (call, False, 0))
        self._pending[call.call_id] = (call, force or forced, self._era)
        if not self._busy:
            self._spawn(self._drain())

    def hurry(self) -> None:
        """End now the graces of the stops asked so far: what is left of those trees is
        killed at once (the runner is exiting; a stop asked later gets its grace)."""
        self._era += 1
        self._leaving = True
        self._hurried.set()
        self._hurried = asyncio.Event()

    async def settled(self) -> None:
        """Return once no stop is under way (the kills after the grace included)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        self._busy = True
        try:
            while self._pending:
                batch, self._pending = self._pending, {}
                await self._signal(batch)
        finally:
            self._busy = False

    async def _signal(self, batch: dict[str, tuple[Stoppable, bool, int]]) -> None:
        forced = [c.target() for c, force, _ in batch.values() if force]
        graceful = [c for c, force, _ in batch.values() if not force]
        era = max(e for _, _, e in batch.values())
        try:
            if forced:
                procs = await asyncio.to_thread(process_tree.find_trees, forced)
                process_tree.kill_all(procs, forced)
            if graceful:
                targets = [c.target() for c in graceful]
                procs = await asyncio.to_thread(process_tree.find_trees, targets)
                process_tree.ask_to_end(procs, targets)
                self._spawn(self._kill_after_grace(graceful, era))
        except Exception:
            log.exception("stopping %d call(s) failed", len(batch))

    async def _kill_after_grace(self, calls: list[Stoppable], era: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._grace
        while self._era == era and (left := deadline - loop.time()) > 0:
            await event_within(self._hurried, left)
        # Targets are taken again: a root reaped meanwhile is no longer named by pid.
        targets = [c.target() for c in calls]
        try:
            survivors = await asyncio.to_thread(process_tree.find_trees, targets)
            process_tree.kill_all(survivors, targets)
        except Exception:
            log.exception("killing what was left of %d call(s) failed", len(calls))
        # Ungrouped targets were just found by a scan, marker included.
        self._unswept.extend(
            c for c, t in zip(calls, targets, strict=True) if t.members is not None
        )
        self._last_due = loop.time()
        if self._unswept and not self._sweeping:
            self._spawn(self._sweep())

    async def _sweep(self) -> None:
        """The last look by marker for the grouped targets whose graces have ended: one
        scan for all that are due when it starts, once their burst is over."""
        self._sweeping = True
        try:
            while self._unswept:
                await self._burst_over()
                calls, self._unswept = self._unswept, []
                # Taken now, not at the grace's end: a group emptied since is no longer
                # named by its number (see RunningCall.target).
                batch = [c.target() for c in calls]
                try:
                    left = await asyncio.to_thread(process_tree.find_trees, batch, True)
                    process_tree.kill_all(left, batch)
                except Exception:
                    log.exception("the last look for %d call(s) failed", len(batch))
        finally:
            self._sweeping = False

    async def _burst_over(self) -> None:
        """Return once no grace has ended for :data:`SWEEP_QUIET` seconds, at most
        :data:`SWEEP_LATEST` seconds from now, or at once when hurried (the runner is
        leaving). A look reads the environment of every young process: run back to back
        through a burst of stops, looks held the interpreter from the runner's loop,
        whose every system call then waited for it (a status file took ~6 ms)."""
        loop = asyncio.get_running_loop()
        latest = loop.time() + SWEEP_LATEST
        while not self._leaving:
            left = min(self._last_due + SWEEP_QUIET, latest) - loop.time()
            if left <= 0:
                return
            await event_within(self._hurried, left)
