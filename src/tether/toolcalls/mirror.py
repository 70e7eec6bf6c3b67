"""The seam for a live copy of every call's output outside this process.

On one node nothing reads it (:class:`NoMirror`). With several nodes, the cluster's
implementation copies each chunk to a shared stream so that another node can follow a
call this one runs, with the same event ids.
"""

from __future__ import annotations

from typing import Protocol

from tether.store.records import OutputChunk


class OutputMirror(Protocol):
    def chunk(self, call_id: str, chunk: OutputChunk) -> None:
        """A new chunk of ``call_id`` (called on the event loop; must not block)."""

    def ended(self, call_id: str, last_seq: int) -> None:
        """``call_id`` ended after chunk ``last_seq``, and its end is in the store."""


class NoMirror:
    """The single node's mirror: nothing outside reads the output live."""

    def chunk(self, call_id: str, chunk: OutputChunk) -> None:
        return None

    def ended(self, call_id: str, last_seq: int) -> None:
        return None
