"""Following what running calls use: one loop reads every call's group, records peaks,
and kills a call whose group passed a limit the kernel does not end by itself."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import dataclass, field

from tether.sandbox.groups import CallGroup
from tether.sandbox.limits import KilledBy, Limits, Resources, Usage, exceeded

log = logging.getLogger(__name__)

# How often the loop looks for calls due a reading, and the shortest gap between two
# readings of one call. A call is read again after this while it moves (its process
# count changes, or it used CPU since the last reading); while it stays still (a
# `sleep`, a command waiting on the network), each gap doubles up to
# _MAX_GAP, so a thousand idle calls cost a few hundred readings a second, not ten
# thousand. With many calls in flight even the shortest gap grows, by _GAP_PER_CALL per
# call (a thousand calls just started would otherwise cost ten thousand readings a
# second). Memory and process limits are the kernel's to enforce at once; a reading
# only ends the rest of the call after. A CPU limit is the watcher's own, so a call
# with one is read again before it could have used what it has left, on every core.
_INTERVAL = 0.1
_MAX_GAP = 2.0
_GAP_PER_CALL = 0.001
# CPU seconds between two readings below which a call counts as still.
_STILL_CPU = 0.01
_CORES = max(1, len(os.sched_getaffinity(0)))
# A fork bomb forks while it is being killed; give up after this many sweeps.
_KILL_SWEEPS = 50
# Groups still held (by a zombie not yet reaped, or by what a command left running in
# the background) are retried every this many readings.
_RETRY_EVERY = 10


@dataclass(eq=False)
class CallWatch:
    """One call's readings so far."""

    group: CallGroup
    limits: Limits
    pgid: int | None = None
    peak_memory: int | None = None
    peak_processes: int = 0
    cpu_seconds: float | None = None
    killed_by: KilledBy | None = None
    ended: bool = False
    # When the next reading is due (loop time), and the gap before it.
    due: float = 0.0
    gap: float = _INTERVAL
    _processes: int | None = None
    _cpu: float | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def schedule(
        self, usage: Usage, now: float, tick: float = _INTERVAL, shortest: float = _INTERVAL
    ) -> None:
        """Set when to read again after ``usage``, read at ``now`` (``tick``: how often
        the loop looks; ``shortest``: the gap after a move)."""
        cpu_now = usage.cpu_seconds
        busy = cpu_now is not None and cpu_now - (self._cpu or 0.0) >= _STILL_CPU
        moving = busy or usage.processes != self._processes
        self._processes, self._cpu = usage.processes, cpu_now
        longest = max(_MAX_GAP, shortest)
        self.gap = shortest if moving else min(max(self.gap, shortest) * 2, longest)
        gap = self.gap
        cpu = self.limits.cpu_seconds
        if cpu is not None and usage.cpu_seconds is not None:
            gap = min(gap, max(tick, (cpu - usage.cpu_seconds) / _CORES))
        self.due = now + gap

    def record(self, usage: Usage) -> None:
        if usage.peak_memory_bytes is not None:
            self.peak_memory = max(self.peak_memory or 0, usage.peak_memory_bytes)
        if usage.processes is not None:
            self.peak_processes = max(self.peak_processes, usage.processes)
        if usage.cpu_seconds is not None:
            self.cpu_seconds = max(self.cpu_seconds or 0.0, usage.cpu_seconds)

    def resources(self, ran: bool) -> Resources:
        # A call that ran had at least one process, even if it ended between readings.
        processes = max(self.peak_processes, 1) if ran else self.peak_processes
        return Resources(self.peak_memory, self.cpu_seconds, processes, self.killed_by, self.limits)


def kill_group(group: CallGroup, pgid: int | None) -> None:
    """SIGKILL every process of the group (and of the process group), sweeping again
    while new ones appear (blocking)."""
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for _ in range(_KILL_SWEEPS):
        members = group.members()
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _conclude(
    group: CallGroup, pgid: int | None, limits: Limits, killed_by: KilledBy | None
) -> tuple[Usage, KilledBy | None, bool]:
    """A call's last reading, its final verdict, and whether its group is released
    (one trip to a worker thread for all three)."""
    usage = group.read()
    verdict = killed_by or exceeded(usage, limits)
    if verdict is not None:
        # A limit ends the whole call, background processes included; otherwise what
        # the command left running in the background is left alone (its group stays
        # until that ends).
        kill_group(group, pgid)
    return usage, verdict, group.close()


def _release(groups: list[CallGroup]) -> list[CallGroup]:
    """Close what groups can be closed; the ones still held."""
    return [g for g in groups if not g.close()]


def _read_all(watches: list[CallWatch]) -> list[Usage]:
    return [w.group.read() for w in watches]


class Watcher:
    """Reads every watched call's group on one loop while there are any."""

    def __init__(self, interval: float = _INTERVAL) -> None:
        self._interval = interval
        self._watches: set[CallWatch] = set()
        self._lingering: list[CallGroup] = []
        self._loop: asyncio.Task[None] | None = None

    def add(self, watch: CallWatch) -> None:
        self._watches.add(watch)
        self._ensure_loop()

    def _ensure_loop(self) -> None:
        if self._loop is None or self._loop.done():
            self._loop = asyncio.ensure_future(self._run())

    async def finish(self, watch: CallWatch, ran: bool) -> Resources:
        """Stop watching a call whose root process ended; its final figures."""
        self._watches.discard(watch)
        async with watch._lock:
            watch.ended = True
            usage, verdict, closed = await asyncio.to_thread(
                _conclude, watch.group, watch.pgid, watch.limits, watch.killed_by
            )
            watch.record(usage)
            watch.killed_by = verdict
            if not closed:
                self._lingering.append(watch.group)
                self._ensure_loop()
        return watch.resources(ran)

    async def close(self) -> None:
        """Stop the loop and release what groups can be released (at shutdown)."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        await self._retry_lingering()

    async def _retry_lingering(self) -> None:
        pending, self._lingering = self._lingering, []
        self._lingering.extend(await asyncio.to_thread(_release, pending))

    async def _run(self) -> None:
        tick = 0
        loop = asyncio.get_running_loop()
        while self._watches or self._lingering:
            await asyncio.sleep(self._interval)
            tick += 1
            if self._lingering and tick % _RETRY_EVERY == 0:
                await self._retry_lingering()
            # The reading's time is taken before it: a CPU limit's bound counts from there.
            now = loop.time()
            watches = [w for w in self._watches if w.due <= now]
            if not watches:
                continue
            try:
                readings = await asyncio.to_thread(_read_all, watches)
            except Exception:
                log.exception("reading call resources failed")
                continue
            shortest = max(self._interval, len(self._watches) * _GAP_PER_CALL)
            for watch, usage in zip(watches, readings, strict=True):
                watch.record(usage)
                watch.schedule(usage, now, self._interval, shortest)
                await self._enforce(watch, usage)

    async def _enforce(self, watch: CallWatch, usage: Usage) -> None:
        if watch.killed_by is not None:
            return
        verdict = exceeded(usage, watch.limits)
        if verdict is None:
            return
        async with watch._lock:
            if watch.ended:
                return
            watch.killed_by = verdict
            await asyncio.to_thread(kill_group, watch.group, watch.pgid)
