"""Long lists of values in ``IN (...)``: a statement binds one parameter per value, and
PostgreSQL's driver takes at most 32,767 (40,000 expired call directories stopped every
start). Lists that can grow without bound are sent in batches."""

from __future__ import annotations

from collections.abc import Collection, Iterator

#: Values per statement: far below the driver's limit, with room for other parameters.
BATCH = 10_000


def batches(values: Collection[str]) -> Iterator[list[str]]:
    """``values`` in lists of at most BATCH."""
    ordered = list(values)
    for start in range(0, len(ordered), BATCH):
        yield ordered[start : start + BATCH]
