"""A call's two small files: its spec (what runs, as whom, until when) and its end.

Both are JSON written atomically (see :func:`layout.write_atomically`). A file that
cannot be read as what it should be raises :class:`CorruptFile` naming it, so the
server can end the call ``error`` saying which file was bad instead of crashing.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

from tether.keeper import layout
from tether.sandbox.limits import Resources

StoppedBy = Literal["deadline", "request"]
_T = TypeVar("_T")


class CorruptFile(Exception):
    """A call file that exists but does not hold what it should."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        super().__init__(f"{path} is unreadable: {why}")


@dataclass(frozen=True)
class CallSpec:
    """A started call: its process identity (pid plus start time, as pids are reused)
    and its absolute kill deadline (epoch seconds; None: none)."""

    call_id: str
    argv: list[str]
    cwd: str
    pid: int
    create_time: float
    marker: str
    started_at: float
    kill_at: float | None
    output_limit: int | None


@dataclass(frozen=True)
class CallEnd:
    """How a call ended: its exit code, or the signal that killed it, and when.

    ``stopped_by`` says whether the runner stopped it (its deadline, or a request) and
    ``output_end`` is the position past its last output record. ``resources`` is what
    its tree used, under which limits (:meth:`Resources.as_record`), when the runner
    ran it under limits (protocol 2).
    """

    exit_code: int | None
    signal: int | None
    ended_at: float
    stopped_by: StoppedBy | None
    output_end: int
    dropped_bytes: int = 0
    resources: dict[str, Any] | None = None

    def measured(self) -> Resources | None:
        """What the call used, if the runner measured it (checked by :func:`read_end`)."""
        return None if self.resources is None else Resources.from_record(self.resources)


def write_spec(directory: Path, spec: CallSpec) -> None:
    """Record (or update, after an extension) a call's spec: the first time into the
    room :func:`keep_rooms` kept for it."""
    layout.write_atomically(directory / layout.SPEC_NAME, asdict(spec), _room(directory, "spec"))


#: Room kept for a call's end from its start, so the end is recorded on a disk that has
#: filled meanwhile: several times what an end takes (its ``resources`` included), and
#: one block of the disk, which the file keeps once cut to the end's size (a larger
#: room would give blocks back, to be taken by whatever writes next).
END_ROOM = 4096
#: What a spec grows by from its draft (see :func:`keep_rooms`) once its process is
#: known: a pid of up to 7 digits for the draft's 0, two times of up to 24 characters
#: (a float's longest form) for its 0.0.
SPEC_GROWTH = 64


def _room(directory: Path, which: Literal["spec", "end"]) -> Path:
    name = layout.SPEC_NAME if which == "spec" else layout.STATUS_NAME
    return directory / f".{name}.room"


def keep_rooms(directory: Path, draft: CallSpec) -> None:
    """Before a call starts: take the disk its spec (``draft`` with the process not yet
    known) and its end will be written on, so both are recorded on a disk that fills
    up meanwhile."""
    layout.make_room(_room(directory, "end"), END_ROOM)
    size = len(json.dumps(asdict(draft)).encode()) + SPEC_GROWTH
    layout.make_room(_room(directory, "spec"), size)


def write_end(directory: Path, end: CallEnd) -> None:
    """Record a call's end; written once, atomically (into its room, if it was kept)."""
    layout.write_atomically(directory / layout.STATUS_NAME, asdict(end), _room(directory, "end"))


#: Far more than a spec or an end holds (a spec carries the command and its cwd); a
#: bigger file is not one the runner wrote.
MAX_FILE_BYTES = 4 * 1024 * 1024


def _load(path: Path) -> dict[str, Any] | None:
    """The file's JSON object; None if there is no file. Only a regular file of at most
    MAX_FILE_BYTES is read (a FIFO would block, a link may point anywhere)."""
    try:
        raw = layout.read_file(path, MAX_FILE_BYTES + 1, most=MAX_FILE_BYTES)
    except layout.Unreadable as exc:
        raise CorruptFile(path, exc.why) from exc
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise CorruptFile(path, f"not JSON ({reason})") from None
    if not isinstance(data, dict):
        raise CorruptFile(path, "not a JSON object")
    return data


#: The type of every field, checked on reading (None: the field may be null).
_SPEC_TYPES: dict[str, tuple[type | None, ...]] = {
    "call_id": (str,),
    "argv": (list,),
    "cwd": (str,),
    "pid": (int,),
    "create_time": (float,),
    "marker": (str,),
    "started_at": (float,),
    "kill_at": (float, None),
    "output_limit": (int, None),
}
_END_TYPES: dict[str, tuple[type | None, ...]] = {
    "exit_code": (int, None),
    "signal": (int, None),
    "ended_at": (float,),
    "stopped_by": (str, None),
    "output_end": (int,),
    "dropped_bytes": (int,),
    "resources": (dict, None),
}


def read_spec(directory: Path) -> CallSpec | None:
    """The call's spec, or None if it was never written."""
    return _read(directory / layout.SPEC_NAME, CallSpec, _SPEC_TYPES)


def read_end(directory: Path) -> CallEnd | None:
    """The call's end, or None while it runs (no status file yet)."""
    path = directory / layout.STATUS_NAME
    end = _read(path, CallEnd, _END_TYPES)
    if end is not None and end.exit_code is None and end.signal is None:
        raise CorruptFile(path, "neither an exit code nor a signal")
    if end is not None and end.stopped_by not in (None, "deadline", "request"):
        raise CorruptFile(path, f"stopped_by is {end.stopped_by!r}")
    try:
        if end is not None:
            end.measured()
    except (TypeError, ValueError, AttributeError) as exc:
        raise CorruptFile(path, f"resources: {exc}") from exc
    return end


def _read(path: Path, kind: type[_T], types: dict[str, tuple[type | None, ...]]) -> _T | None:
    data = _load(path)
    if data is None:
        return None
    # Fields a newer runner added are left out: they are for the servers that know them.
    known = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    try:
        value = kind(**{k: v for k, v in data.items() if k in known})
        for name, allowed in types.items():
            _check_type(name, getattr(value, name), allowed)
    except (TypeError, ValueError) as exc:
        raise CorruptFile(path, str(exc)) from exc
    return value


def _check_type(name: str, value: object, allowed: tuple[type | None, ...]) -> None:
    """A JSON value of one of ``allowed`` (float: any finite number; never a bool)."""
    if value is None and None in allowed:
        return
    if isinstance(value, bool):
        ok = False
    elif float in allowed and isinstance(value, int | float):
        ok = math.isfinite(value)
    else:
        ok = any(t is not None and isinstance(value, t) for t in allowed)
    if not ok:
        raise ValueError(f"{name} is {value!r}")
