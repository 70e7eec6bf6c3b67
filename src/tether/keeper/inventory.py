"""What became of the calls a previous server left: the database's view (rows still
unfinished) set against the runner's (calls it runs) and the files (ends recorded).

Pure apart from reading the small per-call files (and, for :func:`strays`, asking the
database which ids it knows); used at start-up (adoption) and by ``tether status``.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tether.keeper import layout
from tether.keeper.status import CallEnd, CallSpec, CorruptFile, read_end, read_spec
from tether.store.records import ToolCallRecord

if TYPE_CHECKING:
    from tether.store.toolcalls import ToolCallRepository

Fate = Literal["running", "ended", "lost", "not_kept", "no_row", "awaiting_approval"]


@dataclass(frozen=True)
class Found:
    """One call and what became of it. ``problem`` says what was lost (``lost``), that
    it never ran under the keeper (``not_kept``), or why a directory is unaccounted
    for (``no_row``)."""

    call_id: str
    fate: Fate
    record: ToolCallRecord | None
    spec: CallSpec | None
    end: CallEnd | None
    problem: str | None = None
    #: The pid the runner lists for the call, if the runner still runs it.
    runner_pid: int | None = None
    #: When the call is to be killed (epoch seconds; None: never): the runner's own
    #: count when it gives one, else the spec's ``kill_at``. Only for ``running``.
    kill_at: float | None = None


def survey(
    home: Path,
    unfinished: Iterable[ToolCallRecord],
    running: Mapping[str, Mapping[str, Any]],
    directories: Iterable[str],
) -> list[Found]:
    """Classify every unfinished row, and every call directory (of ``directories``, see
    :func:`call_directories`) the runner runs with no unfinished row.

    ``running`` is the runner's list (empty when no runner is up).
    """
    found: list[Found] = []
    rows = {r.id: r for r in unfinished}
    for call_id, record in rows.items():
        found.append(_classify(home, call_id, record, running))
    for call_id in directories:
        if call_id not in rows and call_id in running:
            found.append(
                Found(
                    call_id,
                    "no_row",
                    None,
                    _spec_or_none(home, call_id),
                    None,
                    "the runner runs it but the database has no unfinished row for it",
                )
            )
    return found


async def strays(
    home: Path,
    accounted: Collection[str],
    running: Mapping[str, object],
    repo: ToolCallRepository,
    directories: Iterable[str],
) -> list[Found]:
    """Call directories the database has no row for at all (copied in, or their row
    removed), besides those ``accounted`` for and those the runner runs (which
    :func:`survey` reports): neither adopted nor deleted, only reported."""
    candidates = [d for d in directories if d not in accounted and d not in running]
    known = await repo.known_ids(candidates)
    return [
        Found(
            call_id,
            "no_row",
            None,
            None,
            None,
            f"{layout.call_dir(home, call_id)} has no database row: neither adopted nor "
            "removed (look at it, or remove it)",
        )
        for call_id in candidates
        if call_id not in known
    ]


def _classify(
    home: Path, call_id: str, record: ToolCallRecord, running: Mapping[str, Mapping[str, Any]]
) -> Found:
    if record.status == "awaiting_approval":
        # Never started, so it has no process or files to look for (it is not lost).
        return Found(call_id, "awaiting_approval", record, None, None)
    directory = layout.call_dir(home, call_id)
    listed = running.get(call_id)
    runner_pid = int(listed["pid"]) if listed is not None else None
    try:
        spec = read_spec(directory)
        if spec is None and (runner_pid is not None or directory.is_dir()):
            # Started under the keeper, but its spec was never written (a disk that
            # filled as it started, a runner killed right then): it cannot be followed.
            problem = f"{directory / layout.SPEC_NAME} was never written: its process is unknown"
            return _lost(record, None, problem, runner_pid)
        if spec is None:
            return Found(
                call_id,
                "not_kept",
                record,
                None,
                None,
                f"no call files at {directory}: it was not started under the keeper "
                "(or its files were removed), so its process and output are lost",
            )
        if runner_pid is not None:
            if runner_pid != spec.pid:
                return _lost(
                    record,
                    spec,
                    f"the runner's call {call_id} has pid {runner_pid}, "
                    f"{directory / layout.SPEC_NAME} says {spec.pid}",
                    runner_pid,
                )
            return Found(call_id, "running", record, spec, None, kill_at=_kill_at(spec, listed))
        end = read_end(directory)
    except CorruptFile as exc:
        return _lost(record, None, str(exc), runner_pid)
    if end is None:
        return _lost(
            record,
            spec,
            f"its runner stopped before it ended ({directory / layout.STATUS_NAME} "
            "was never written): its exit status is lost",
        )
    return Found(call_id, "ended", record, spec, end)


def _kill_at(spec: CallSpec, listed: Mapping[str, Any] | None) -> float | None:
    """The deadline of a running call, on this moment's wall clock. ``kill_at`` was
    fixed on the wall clock of the call's start; a step of that clock since (an NTP
    correction, a suspended VM resumed) moved it, but not the runner's timer, which
    counts on the monotonic clock: the runner's count (``kill_in``; a runner of an
    older version lists none) is what will happen."""
    if listed is None or "kill_in" not in listed:
        return spec.kill_at
    kill_in = listed["kill_in"]
    if kill_in is None:
        return None
    return time.time() + float(kill_in)


def _lost(
    record: ToolCallRecord, spec: CallSpec | None, problem: str, runner_pid: int | None = None
) -> Found:
    return Found(record.id, "lost", record, spec, None, problem, runner_pid)


def _spec_or_none(home: Path, call_id: str) -> CallSpec | None:
    try:
        return read_spec(layout.call_dir(home, call_id))
    except CorruptFile:
        return None


def call_directories(home: Path) -> list[str]:
    """The ids of the call directories under ``home``, listed once for a survey, its
    strays and the retention sweep."""
    try:
        return sorted(p.name for p in layout.calls_dir(home).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []  # no call ever ran here, or the runner refuses to start (it says why)
