"""Keeping Python's garbage collector off the request path of a long-running process.

A full collection walks every object the process tracks, and most of them are what
start-up created: the imported modules, the app, the services. With a few hundred calls
in flight, a full collection paused a node's event loop for 180-750 ms, which was the
whole of the p99 of a list of calls (bench_cluster, 2026-12-01). Once start-up is done,
those objects are moved out of the collector's sight for good (``gc.freeze``); what is
created later is collected as before.

Packages imported late (``late_imports``: the model SDK at the first turn, the MCP
SDK) are as long-lived as start-up's modules: the model SDK alone added some 80,000
objects to every full collection, and with 1,000 calls in flight a full collection
took 85-135 ms. They are exempted the same way once imported.

What is left are the calls in flight: some 125 tracked objects each (their tasks,
coroutines, events), 125,000 with 1,000 calls, whose full collection still took about
100 ms. A full collection comes once the objects promoted to the oldest generation
since the last one reach a quarter of those that survived it, and under load most
promotions are requests that happen to be in flight when a young collection runs: at
Python's default of one young collection per 700 allocations, the list's load promoted
enough to bring a full collection every few seconds. A settled process collects its
young generation every 10,000 allocations instead: fourteen times fewer promotions,
and no full collection at all through the 1,000-call ramp, the list's load and the stop
(bench_many_calls, 2026-12-02), for at most some thousands of young objects more alive.
"""

from __future__ import annotations

import gc

_settled = False
# Allocations (net of frees) between young collections; Python's default is 700.
_YOUNG_COLLECTION_AFTER = 10_000


def settle() -> None:
    """Collect once, then exempt everything alive now from later collections, and
    collect the young generation less often (call once, when start-up has built what
    lives as long as the process, in a process that runs one server for its whole life:
    what is frozen is never collected)."""
    global _settled
    gc.collect()
    gc.freeze()
    gc.set_threshold(_YOUNG_COLLECTION_AFTER, *gc.get_threshold()[1:])
    _settled = True


def settle_late() -> None:
    """Exempt what was built since :func:`settle` (a late import's modules) from later
    collections too; nothing in a process that never settled (tests building many apps).

    No collection first: it would pause the event loop as long as a full one. Garbage
    cycles that exist at this moment are kept for good: a one-off of a few kB per late
    package."""
    if _settled:
        gc.freeze()
