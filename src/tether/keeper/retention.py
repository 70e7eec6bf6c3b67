"""Removing the files of calls that ended long ago (TETHER_CALL_RETENTION_DAYS).

Only a call that has a database row and a status file older than the retention is
removed; a directory without a row is reported and kept (never silently deleted), and
one whose status cannot be read is left for a person to look at.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Collection, Iterable
from pathlib import Path

from tether.keeper import layout
from tether.keeper.status import CorruptFile, read_end

log = logging.getLogger(__name__)


def ended_before(home: Path, cutoff: float, directories: Iterable[str]) -> list[str]:
    """Ids of calls (of ``directories``) whose recorded end is older than ``cutoff``
    (epoch seconds)."""
    old = []
    for call_id in directories:
        directory = layout.call_dir(home, call_id)
        try:
            end = read_end(directory)
        except CorruptFile as exc:
            log.warning("keeping %s: %s", directory, exc)
            continue
        if end is not None and end.ended_at < cutoff:
            old.append(call_id)
    return old


async def sweep(
    home: Path, cutoff: float, directories: Iterable[str], rowless: Collection[str]
) -> int:
    """Remove the files of calls that ended before ``cutoff`` but those ``rowless`` (the
    strays :func:`inventory.strays` reported: no database row); how many were removed."""
    removed = 0
    old = await asyncio.to_thread(ended_before, home, cutoff, directories)
    for call_id in old:
        if call_id not in rowless:
            await asyncio.to_thread(shutil.rmtree, layout.call_dir(home, call_id), True)
            removed += 1
    if removed:
        log.info("removed the files of %d call(s) past their retention", removed)
    return removed
