"""Turning result rows into the records repositories return."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import sqlalchemy as sa

R = TypeVar("R")


def to_record(cls: type[R], row: sa.Row[Any]) -> R:
    """Build ``cls`` (a dataclass) from the row's columns of the same names."""
    mapping = row._mapping
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    return cls(**{name: mapping[name] for name in names if name in mapping})


def record_values(record: Any, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """A record's fields as column values for an INSERT."""
    return {k: v for k, v in dataclasses.asdict(record).items() if k not in exclude}
