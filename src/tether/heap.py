"""Keeping Python's garbage collector off the request path of a long-running process.

A full collection walks every object the process tracks, and most of them are what
start-up created: the imported modules, the app, the services. With a few hundred calls
in flight, a full collection paused a node's event loop for 180-750 ms, which was the
whole of the p99 of a list of calls (bench_cluster, 2026-12-01). Once start-up is done,
those objects are moved out of the collector's sight for good (``gc.freeze``); what is
created later is collected as before.

What is left are the calls in flight (some 125 tracked objects each: their tasks,
coroutines, events; 125,000 with 1,000 calls) and the packages imported late (the model
SDK at the first turn, some 80,000 objects): full collections of 85-135 ms with 1,000
calls in flight (bench_many_calls, 2026-12-02). A full collection comes once the objects
promoted to the oldest generation since the last one reach a quarter of those that
survived it, and under load most promotions are requests that happen to be in flight
when a young collection runs: at Python's default of one young collection per 700
allocations, the list's load brought a full collection every few seconds. A settled
process collects its young generation every 10,000 allocations instead: fourteen times
fewer promotions, and no full collection at all through the 1,000-call ramp, the list's
load and the stop, for at most some thousands of young objects more alive.

Late imports are not frozen: a freeze then would also freeze whatever is in flight at
that moment (after a restart, the bookkeeping of every adopted call), and cycles among
it would never be collected.
"""

from __future__ import annotations

import gc

# Allocations (net of frees) between young collections; Python's default is 700.
_YOUNG_COLLECTION_AFTER = 10_000


def settle() -> None:
    """Collect once, then exempt everything alive now from later collections, and
    collect the young generation less often (call once, when start-up has built what
    lives as long as the process, in a process that runs one server for its whole life:
    what is frozen is never collected)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(_YOUNG_COLLECTION_AFTER, *gc.get_threshold()[1:])
