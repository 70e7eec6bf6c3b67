"""A call's output file as the runner appends to it: whole records, whatever the disk.

A full disk (or a quota, or a file size limit) used to end the call: the failed write
raised, the runner killed the tree, and a record cut short stayed in the file. Output
is worth less than the command that makes it, so now a record the disk does not take
is undone (the file is cut back to the last whole record: it never holds a part) and
its bytes are counted as lost. The next record that fits is preceded by a note saying
how many bytes were lost and why; the call runs on meanwhile.
"""

from __future__ import annotations

import logging
import os

from tether.keeper import records

log = logging.getLogger(__name__)


class OutputFile:
    """Appends records to the output file open (``O_APPEND``) on ``fd``; not its owner."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        #: The position past the last whole record (the file's size).
        self.position = 0
        #: Bytes of output no record holds: lost since the last note said so.
        self.unnoted = 0
        #: Bytes of output lost in all.
        self.lost = 0
        self._why = ""

    def append(self, stream: str, data: bytes) -> bool:
        """Append ``data`` printed on ``stream`` as one record; whether it was written
        (when not, it is counted as lost, and said so before the next one that fits)."""
        if not data:
            return False
        if self.unnoted and not self._write(records.encode("stderr", self._note())):
            self._count_lost(len(data))
            return False
        self.unnoted = 0
        if self._write(records.encode(stream, data)):
            return True
        self._count_lost(len(data))
        return False

    def settle(self) -> None:
        """At the end: say what was lost since the last note, if the disk takes it now."""
        if self.unnoted and self._write(records.encode("stderr", self._note())):
            self.unnoted = 0

    def _note(self) -> bytes:
        return (
            f"\n[tether: {self.unnoted} bytes of this call's output were lost: the output "
            f"file could not be written ({self._why})]\n"
        ).encode()

    def _count_lost(self, size: int) -> None:
        if not self.unnoted:
            log.warning("output lost from %d bytes on: %s", self.position, self._why)
        self.unnoted += size
        self.lost += size

    def _write(self, record: bytes) -> bool:
        """Write all of ``record`` or none of it (a part is cut off again)."""
        view = memoryview(record)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self._why = exc.strerror or type(exc).__name__
            # Freeing what was written of it needs no room; a failure here leaves a
            # part, which readers take for corruption: let it end the call.
            os.ftruncate(self._fd, self.position)
            return False
        self.position += len(record)
        return True
