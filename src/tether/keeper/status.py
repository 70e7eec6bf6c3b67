"""A call's two small files: its spec (what runs, as whom, until when) and its end.

Both are JSON written atomically (see :func:`layout.write_atomically`). A file that
cannot be read as what it should be raises :class:`CorruptFile` naming it, so the
server can end the call ``error`` saying which file was bad instead of crashing.
"""

from __future__ import annotations

import json
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
    """Record (or update, after an extension) a call's spec."""
    layout.write_atomically(directory / layout.SPEC_NAME, asdict(spec))


def write_end(directory: Path, end: CallEnd) -> None:
    """Record a call's end; written once, atomically."""
    layout.write_atomically(directory / layout.STATUS_NAME, asdict(end))


def _load(path: Path) -> dict[str, Any] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptFile(path, str(exc)) from exc
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFile(path, f"not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CorruptFile(path, "not a JSON object")
    return data


def read_spec(directory: Path) -> CallSpec | None:
    """The call's spec, or None if it was never written."""
    return _read(directory / layout.SPEC_NAME, CallSpec, {"pid": int, "create_time": float})


def read_end(directory: Path) -> CallEnd | None:
    """The call's end, or None while it runs (no status file yet)."""
    path = directory / layout.STATUS_NAME
    end = _read(path, CallEnd, {"ended_at": float, "output_end": int})
    if end is not None and end.exit_code is None and end.signal is None:
        raise CorruptFile(path, "neither an exit code nor a signal")
    try:
        if end is not None:
            end.measured()
    except (TypeError, ValueError, AttributeError) as exc:
        raise CorruptFile(path, f"resources: {exc}") from exc
    return end


def _read(path: Path, kind: type[_T], checked: dict[str, type]) -> _T | None:
    data = _load(path)
    if data is None:
        return None
    # Fields a newer runner added are left out: they are for the servers that know them.
    known = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    try:
        value = kind(**{k: v for k, v in data.items() if k in known})
        _check_types(value, checked)
    except (TypeError, ValueError) as exc:
        raise CorruptFile(path, str(exc)) from exc
    return value


def _check_types(obj: object, fields: dict[str, type]) -> None:
    for name, kind in fields.items():
        value = getattr(obj, name)
        ok = isinstance(value, int | float) if kind is float else isinstance(value, kind)
        if not ok or isinstance(value, bool):
            raise ValueError(f"{name} is {value!r}")
