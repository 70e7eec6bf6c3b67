"""A call the runner runs, as the server sees it: follow its output file, await its end.

Works the same for a call this server started and for one it adopted after a restart:
everything is read from the call's files, from the start, so the records (and their
numbering) are the same each time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tether.keeper import layout, records
from tether.keeper.client import RunnerUnavailable
from tether.keeper.hub import KeeperHub
from tether.keeper.protocol import ProtocolError
from tether.keeper.status import CallEnd, CorruptFile, read_end
from tether.sandbox.limits import Resources
from tether.toolcalls import process_tree
from tether.toolcalls.call import ResultLost
from tether.toolcalls.launcher import EndCause
from tether.waits import event_within

OutputSink = Callable[[str, str], None]
# A quiet call's files are looked at this often even with no event: a safety net for an
# event sent before anyone listened (every end and every runner loss comes as an event).
# Each look is a trip to a worker thread, so a thousand idle calls looked at every 5 s
# cost a server a sixth of a core.
_LOOK_ANYWAY = 20.0


class CallLost(ResultLost):
    """The call cannot be followed to its end: a file is corrupt or missing, or its
    runner died before recording the end. The message says exactly what was lost."""


class KeeperProcess:
    """A call's tree under the runner, led by process group ``pgid``."""

    def __init__(
        self,
        hub: KeeperHub,
        call_id: str,
        pgid: int,
        adopted: bool = False,
        marker: str | None = None,
        since: float | None = None,
    ) -> None:
        self.call_id = call_id
        self.pgid = pgid
        #: What every process of the tree carries in its environment, and since when
        #: (to find what is left of it when its runner is gone).
        self.marker = marker
        self.since = time.time() if since is None else since
        self._hub = hub
        self._signal = hub.signal_of(call_id)
        # An adopted call may have ended between the runner's list and this handle (its
        # event then went unheard): its files are looked at once before any wait.
        self._look_first = adopted
        self.directory = layout.call_dir(hub.home, call_id)
        self._end: CallEnd | None = None
        self.position = 0
        self._stopped_lost = False

    async def follow(self, sink: OutputSink) -> None:
        """Pass every record to ``sink`` in order, from the first, until the end.

        Raises CallLost when the output or status file is corrupt, or the runner
        went away without recording the end.
        """
        try:
            await self._follow(sink)
        except CallLost:
            await self._stop_lost()
            raise

    async def _follow(self, sink: OutputSink) -> None:
        path = self.directory / layout.OUTPUT_NAME
        checked = self._look_first
        try:
            while True:
                seen = self._signal.changed
                # Whether this read starts after the end was recorded: the output is then
                # complete, and a read that finds nothing more before it means corrupt.
                ended_before_read = self._end is not None
                got, self.position = await asyncio.to_thread(
                    records.read_records, path, self.position
                )
                for record in got:
                    sink(record.stream, record.text)
                if got:
                    continue
                end = await self._ended(look=checked)
                if end is None:
                    checked = await _changed(seen)
                elif self.position >= end.output_end:
                    return
                elif ended_before_read:
                    # Ended, its bytes all there, and no whole record to read: one
                    # claims to run past the end (the loop spun on it for ever).
                    raise records.CorruptOutput(
                        path, self.position, f"no whole record before byte {end.output_end}"
                    )
                # Else the end was recorded after this read: the rest is read next.
        except records.CorruptOutput as exc:
            self._hub.forget(self.call_id)
            raise CallLost(str(exc)) from exc

    async def _ended(self, look: bool = False) -> CallEnd | None:
        """The end once the runner recorded it (the file is read when an event says it
        may be there, or when ``look``)."""
        if self._end is not None:
            return self._end
        if not (self._signal.ended or self._signal.runner_gone or look):
            return None
        try:
            self._end = await asyncio.to_thread(read_end, self.directory)
        except CorruptFile as exc:
            raise CallLost(str(exc)) from exc
        if self._end is None and self._signal.runner_gone:
            raise CallLost(
                f"the runner stopped before call {self.call_id} ended; its output up to "
                f"byte {self.position} of {self.directory / layout.OUTPUT_NAME} is kept, "
                "its exit status is lost"
            )
        if self._end is None and self._signal.ended:
            # The runner writes status.json before it says "ended": it could not.
            raise CallLost(
                f"the runner ended call {self.call_id} but could not record its end (see "
                f"{layout.runner_log(self._hub.home)}); its output up to byte "
                f"{self.position} is kept, its exit status is lost"
            )
        if self._end is not None and self._end.output_end > self._size():
            raise CallLost(
                f"{self.directory / layout.OUTPUT_NAME} is truncated: the status says "
                f"{self._end.output_end} bytes, the file has {self._size()}"
            )
        return self._end

    def _size(self) -> int:
        try:
            return (self.directory / layout.OUTPUT_NAME).stat().st_size
        except FileNotFoundError:
            return 0

    async def wait(self) -> int:
        """Await the end: the exit code, or minus the signal number that ended it."""
        look = self._look_first
        while True:
            seen = self._signal.changed
            try:
                end = await self._ended(look)
            except CallLost:
                await self._stop_lost()
                raise
            if end is not None:
                self._hub.forget(self.call_id)
                return -end.signal if end.signal is not None else int(end.exit_code or 0)
            look = await _changed(seen)

    async def set_kill_deadline(self, kill_after: float | None) -> None:
        """Move the kill deadline the runner enforces (seconds from now; None: none)."""
        kill_at = None if kill_after is None else time.time() + kill_after
        try:
            await self._hub.request("extend", call_id=self.call_id, kill_at=kill_at)
        except ProtocolError:
            # The runner no longer runs it: a tree that has ended has no deadline to
            # move (an extend racing the call's end answered 500, and a call extended
            # while it started failed with this error though its command succeeded).
            if not await self._has_ended():
                raise

    async def _has_ended(self) -> bool:
        """Whether the runner has recorded the call's end (it does so before it drops
        the call from its list)."""
        try:
            return await self._ended(look=True) is not None
        except CallLost:
            return True  # ended, its end unreadable: follow and wait say so

    async def resources(self) -> Resources | None:
        """What the tree used, as the runner recorded at its end (None: not ended yet,
        lost, or started without limits)."""
        try:
            end = await self._ended(look=True)
        except CallLost:
            return None
        return None if end is None else end.measured()

    def end_cause(self) -> EndCause | None:
        """The runner records whether it stopped the tree (its deadline, a request) or
        the command ended before any stop reached it."""
        if self._end is None:
            return None
        return self._end.stopped_by or "itself"

    async def _stop_lost(self) -> None:
        """What is left of a call that cannot be followed would run on unwatched, past
        every deadline: it is stopped, by its runner when it still runs the call, else
        (the runner gone) by the marker its processes carry."""
        if self._stopped_lost:
            return
        self._stopped_lost = True
        if not self._signal.runner_gone:
            try:
                await self._hub.request("signal", call_id=self.call_id, force=True)
                return
            except (RunnerUnavailable, ProtocolError):
                pass  # ended meanwhile, or the runner went away too
        if self.marker is not None:
            await asyncio.to_thread(process_tree.kill_marked, self.marker, self.since)

    def mark_ended_already(self) -> None:
        """The call ended before anyone watched (found at adoption): read the files."""
        self._signal.ended = True
        self._signal.wake()


async def _changed(seen: asyncio.Event) -> bool:
    """Wait for an event; True if none came for a while (then the files are looked at
    anyway: an event sent before anyone listened is not lost for good)."""
    return not await event_within(seen, _LOOK_ANYWAY)
