"""Helpers the console's browser tests import (kept out of conftest.py, whose module
name several test folders share)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class ConsoleErrors(list[str]):
    """Errors the page logged or threw; a test ends by asserting there were none."""


def watch(page: Any, errors: ConsoleErrors) -> Any:
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    return page


def screenshot(page: Any, name: str) -> None:
    """Save a screenshot to $TETHER_SCREENSHOTS/<name>.png when that is set."""
    folder = os.environ.get("TETHER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))
