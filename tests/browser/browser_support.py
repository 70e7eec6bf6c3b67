"""Helpers the console's browser tests import (kept out of conftest.py, whose module
name several test folders share)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from playwright.sync_api import expect


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


def new_chat(page: Any) -> None:
    """Start a new chat from the session list."""
    page.get_by_role("button", name="New chat").click()
    expect(page.locator("#conv-title")).to_have_text("New chat")


def send(page: Any, text: str) -> None:
    """Type ``text`` into the message box and send it with Enter."""
    box = page.get_by_label("Message")
    box.fill(text)
    box.press("Enter")
