"""At start: take up again the calls a previous server left under the runner.

Each call a server that is gone recorded as running or offloaded is classified (see
:mod:`inventory`): still running under the runner, or ended while no server was up, it
becomes live again under its id (the coordinator follows it to its end); lost (its
runner died, a file is corrupt), it ends ``error`` saying what was lost, and the remains
of its tree are killed. Calls without call files were not started under the keeper:
they are left to the usual start-up recovery (recorded as interrupted, their groups
reaped). A call the runner still runs whose row has already ended is killed, never
adopted. A live server's calls are left alone (several may share the database).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.keeper import layout
from tether.keeper.inventory import Found, strays, survey
from tether.keeper.launcher import KeeperLauncher
from tether.store.toolcalls import ToolCallRepository
from tether.toolcalls import process_tree
from tether.toolcalls.coordinator import ToolCallCoordinator

log = logging.getLogger(__name__)


@dataclass
class Adoption:
    """What start-up recovered: outcomes to wait for, by call, and what was lost, by
    task (a task that lost a call cannot be resumed)."""

    waiting: dict[str, asyncio.Task[Any]] = field(default_factory=dict)
    # Every call taken up again (offloaded ones included): no longer "interrupted".
    adopted: set[str] = field(default_factory=set)
    lost: dict[str, list[str]] = field(default_factory=dict)
    # Call directories with no database row at all: reported, kept (see inventory.strays).
    rowless: set[str] = field(default_factory=set)

    def lost_problem(self, task_id: str) -> str | None:
        """Why the task cannot go on, if one of its calls was lost."""
        problems = self.lost.get(task_id)
        return "; ".join(problems) if problems else None


async def adopt_calls(
    home: Path,
    launcher: KeeperLauncher,
    coordinator: ToolCallCoordinator,
    repo: ToolCallRepository,
    directories: list[str],
    gone: Collection[str | None],
) -> Adoption:
    """Adopt every call the runner kept for this home (see the module doc);
    ``directories`` lists its call directories (see inventory.call_directories).
    Only rows of ``gone`` owners are looked at: a live server sharing the database
    runs its own calls, under its own home."""
    running = await launcher.running()
    unfinished = [
        r for r in await repo.unfinished() if r.status != "awaiting_approval" and r.owner in gone
    ]
    adoption = Adoption()
    for found in await asyncio.to_thread(survey, home, unfinished, running, directories):
        await _adopt_one(found, launcher, coordinator, adoption)
    unaccounted = await strays(home, {r.id for r in unfinished}, running, repo, directories)
    adoption.rowless = {f.call_id for f in unaccounted}
    if unaccounted:
        log.warning(
            "%d call director%s with no database row, neither adopted nor removed: %s%s",
            len(unaccounted),
            "y" if len(unaccounted) == 1 else "ies",
            ", ".join(str(layout.call_dir(home, f.call_id)) for f in unaccounted[:5]),
            " ..." if len(unaccounted) > 5 else "",
        )
    if adoption.adopted or adoption.lost:
        log.info(
            "adopted %d call(s) from the runner (%d in the background); %d could not be recovered",
            len(adoption.adopted),
            len(adoption.adopted) - len(adoption.waiting),
            sum(len(p) for p in adoption.lost.values()),
        )
    return adoption


async def _adopt_one(
    found: Found, launcher: KeeperLauncher, coordinator: ToolCallCoordinator, adoption: Adoption
) -> None:
    record, spec = found.record, found.spec
    if record is None:
        # The runner runs it, but its row has ended (a survivor ended it as "node lost"
        # while this node was declared dead) or was never written: nobody would follow
        # it, so its tree is killed, through the runner, rather than adopted.
        log.warning("call %s is stopped, not adopted: %s", found.call_id, found.problem)
        pid = spec.pid if spec is not None else 0
        await launcher.stop([launcher.adopt(found.call_id, pid, running=True)], 0.0, force=True)
        return
    if found.fate == "not_kept":
        # The usual recovery ends it; with the keeper on, its files are missing.
        log.warning("call %s is not adopted: %s", found.call_id, found.problem)
        return
    if found.fate in ("running", "ended") and spec is not None:
        process = launcher.adopt(
            found.call_id,
            spec.pid,
            running=found.fate == "running",
            marker=spec.marker,
            since=spec.create_time,
        )
        # One that ended while no server was up has no deadline left to enforce: past it
        # by now, it would be recorded as killed at its deadline whatever its end. Its
        # status file says whether the runner killed it at its deadline.
        kill_at = found.kill_at if found.fate == "running" else None
        outcome = await coordinator.adopt(record, process, kill_at)
        adoption.adopted.add(found.call_id)
        if record.status == "running":  # a turn waits on it (offloaded: delivered as such)
            adoption.waiting[found.call_id] = outcome
        return
    problem = f"call {found.call_id} could not be recovered after the restart: {found.problem}"
    log.warning("%s", problem)
    if found.runner_pid is not None:
        # The runner still runs it and knows its whole tree: it stops it.
        stopping = launcher.adopt(found.call_id, found.runner_pid, running=True)
        await launcher.stop([stopping], 0.0, force=True)
    elif spec is not None:
        # Whatever is left of its tree would run unwatched.
        await asyncio.to_thread(process_tree.kill_marked, spec.marker, spec.create_time)
    await coordinator.end_lost(record, problem)
    if record.task_id is not None and record.status == "running":
        adoption.lost.setdefault(record.task_id, []).append(problem)
