"""Single-statement writes asked for together share one transaction (group commit).

On SQLite each ``Database.write`` is a transaction of its own: a connection from the
pool, BEGIN, the statement and COMMIT, each a trip to the driver's thread. That cost
0.7 ms of the server's CPU per write on the 2-core CI machine, and 0.1 ms per row when
ten rows went in one ``executemany``. A model reply that asks for ten shell calls makes
thirty such writes at once (each call's audit row, its row, its process group).

:class:`GroupCommit` runs the writes asked for while the previous group was being
committed (or in the same turn of the event loop) in one transaction, identical
statements side by side as one ``executemany``, and answers each writer once that
transaction is committed. If it fails, each write is tried again in a transaction of
its own, so that a writer gets its own outcome, never a neighbour's error.

Order: writes are committed in the order they were asked for, grouped or not:
``Database.write`` first waits for the grouped writes asked before it
(:meth:`GroupCommit.settled`), so an update asked for before a call's end can never
land after it.

For writes whose caller needs nothing back (no row count, no generated key). A write
whose writer is cancelled after asking is still committed; ``then`` runs once its
outcome is known either way (the repositories announce the change to other nodes from
there, never before the commit).

SQLite only: there writes are one at a time anyway. PostgreSQL takes concurrent
writers, and funnelling a node's writes through one transaction at a time would let one
row lock stall them all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.base import Executable

from tether.waits import unawaited_is_fine

log = logging.getLogger(__name__)

Transaction = Callable[[], AbstractAsyncContextManager[AsyncConnection]]
Then = Callable[[], None]


def nothing() -> None:
    """The default ``then``."""
    return None


@dataclass
class _Write:
    statement: Executable
    params: dict[str, Any]
    done: asyncio.Future[None]
    then: Then | None  # None once it has run


class GroupCommit:
    """Writes through ``transaction`` (a context manager that commits at its end),
    grouped."""

    def __init__(self, transaction: Transaction) -> None:
        self._transaction = transaction
        self._waiting: list[_Write] = []
        self._committing: asyncio.Task[None] | None = None

    async def execute(
        self, statement: Executable, params: Mapping[str, Any], then: Then = nothing
    ) -> None:
        """Run ``statement`` with ``params``; return once it is committed."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.add_done_callback(unawaited_is_fine)
        self._waiting.append(_Write(statement, dict(params), done, then))
        if self._committing is None:
            self._committing = asyncio.create_task(self._commit_waiting())
        # Shielded: a writer's cancel leaves ``done`` to say when the write has its
        # outcome (what ``settled`` waits for).
        await asyncio.shield(done)

    async def settled(self) -> None:
        """Return once every write asked for so far has its outcome (writes are answered
        in the order they were asked for, so waiting for the last one is enough)."""
        if self._waiting:
            await asyncio.wait({self._waiting[-1].done})
        elif self._committing is not None:
            await asyncio.wait({self._committing})

    async def _commit_waiting(self) -> None:
        group: list[_Write] = []
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                await self._commit(group)
        finally:
            self._committing = None
            # Only when cancelled (the loop is closing): nothing more will be committed.
            for write in [*group, *self._waiting]:
                write.done.cancel()
                _answer(write, None)
            self._waiting = []

    async def _commit(self, group: list[_Write]) -> None:
        failed: Exception | None = None
        try:
            async with self._transaction() as conn:
                for run in _runs(group):
                    params: Sequence[dict[str, Any]] | dict[str, Any] = (
                        run[0].params if len(run) == 1 else [w.params for w in run]
                    )
                    await conn.execute(run[0].statement, params)
        except Exception as exc:
            failed = exc
        if failed is None:
            for write in group:
                _answer(write, None)
        elif len(group) == 1:
            _answer(group[0], failed)
        else:
            # Out of the except block: a writer's error must not carry the group's (and
            # its neighbours' values) as its context.
            for write in group:
                await self._commit([write])


def _runs(group: list[_Write]) -> Iterator[list[_Write]]:
    """Consecutive writes of one statement with the same columns: one executemany."""
    run = [group[0]]
    for write in group[1:]:
        first = run[0]
        if write.statement is first.statement and write.params.keys() == first.params.keys():
            run.append(write)
        else:
            yield run
            run = [write]
    yield run


def _answer(write: _Write, error: Exception | None) -> None:
    """Give the write its outcome (unless the loop's closing cancelled it), then run its
    ``then`` once."""
    if not write.done.done():
        if error is None:
            write.done.set_result(None)
        else:
            write.done.set_exception(error)
    then, write.then = write.then, None
    if then is None:
        return
    try:
        then()
    except Exception:  # the writes behind it must still be committed and answered
        log.exception("what follows a grouped write failed")
