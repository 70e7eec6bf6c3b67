"""Turning result rows into the records repositories return."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

import sqlalchemy as sa

R = TypeVar("R")


def to_record(cls: type[R], row: sa.Row[Any]) -> R:
    """Build ``cls`` (a dataclass) from the row's columns of the same names."""
    # A plain dict of the row and the field names kept per class: looking each name up
    # in the row's mapping was most of the cost of reading a few rows.
    values = row._asdict()
    return cls(**{name: values[name] for name in _field_names(cls) if name in values})


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}


def _field_names(cls: type[Any]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def columns_of(table: sa.Table, values: Mapping[str, Any]) -> Mapping[str, Any]:
    """``values`` for a statement built once, whose columns are taken from the names of
    its parameters: SQLAlchemy would leave out a name that is no column of ``table``, so
    such a name raises here instead of being lost without a word."""
    unknown = values.keys() - table.c.keys()
    if unknown:
        raise ValueError(f"no column {', '.join(sorted(unknown))} in table {table.name!r}")
    return values


def record_values(record: Any, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """A record's fields as column values for an INSERT."""
    return {k: v for k, v in dataclasses.asdict(record).items() if k not in exclude}
