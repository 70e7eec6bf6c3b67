"""Shared fixtures for the governance tests (pure: no I/O except tmp_path in file tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.governance.context import AnalysisContext
from tether.governance.rules import Rule, load_builtin_rules

HOME = Path("/home/u")
WORKSPACE = HOME / "proj"
TETHER_HOME = HOME / ".tether"


@pytest.fixture
def ctx() -> AnalysisContext:
    return AnalysisContext(workspace=WORKSPACE, home=HOME, tether_home=TETHER_HOME)


@pytest.fixture
def rules() -> list[Rule]:
    return load_builtin_rules()
