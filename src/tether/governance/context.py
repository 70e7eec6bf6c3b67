"""The environment an analysis is performed against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AnalysisContext:
    """Absolute locations the analysers compare paths against.

    ``workspace`` is where the agent is expected to work, ``home`` the user's home
    directory and ``tether_home`` Tether's own state (tokens, keys, database).
    The dataclass is frozen and hashable so analysis results can be cached per context.
    """

    workspace: Path
    home: Path
    tether_home: Path

    def __post_init__(self) -> None:
        for name in ("workspace", "home", "tether_home"):
            value = getattr(self, name)
            if not Path(value).is_absolute():
                raise ValueError(f"AnalysisContext.{name} must be absolute, got {value!r}")
