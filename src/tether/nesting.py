"""How deeply JSON data nests lists and objects, counted without recursion (a request
body nested a few hundred deep parses, then fails whatever serialises it again)."""

from __future__ import annotations

from typing import Any


def depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests lists and objects (a scalar: 0, ``[1]``: 1); counting
    stops once past ``limit``, so the answer is at most ``limit + 1``."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if not isinstance(item, dict | list) or not item:
            continue
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, level + 1)
        if deepest > limit:
            break
        # Only containers are stacked: a list of a million numbers took seconds.
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest
