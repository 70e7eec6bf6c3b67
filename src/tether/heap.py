"""Keeping Python's garbage collector off the request path of a long-running process.

A full collection walks every object the process tracks, and most of them are what
start-up created: the imported modules, the app, the services. With a few hundred calls
in flight, a full collection paused a node's event loop for 180-750 ms, which was the
whole of the p99 of a list of calls (bench_cluster, 2026-12-01). Once start-up is done,
those objects are moved out of the collector's sight for good (``gc.freeze``); what is
created later is collected as before.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect once, then exempt everything alive now from later collections (call
    once, when start-up has built what lives as long as the process, in a process that
    runs one server for its whole life: what is frozen is never collected)."""
    gc.collect()
    gc.freeze()
