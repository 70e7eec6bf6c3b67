"""Fixtures for the console's browser tests: one real server and fake model per module,
Debian's headless Chromium driven by Playwright, and a page that fails its test on any
browser console error."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import ConsoleErrors, watch

_INTEGRATION = Path(__file__).resolve().parent.parent / "integration"
sys.path.insert(0, str(_INTEGRATION))

from core_support import FakeModel, temporary_server  # noqa: E402
from helpers import default_http_timeout  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if Path(CHROMIUM).exists():
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is missing (scripts/ensure-chromium installs it)")
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(skip)


@pytest.fixture(scope="module")
def mock_llm() -> Iterator[FakeModel]:
    """The OpenAI-compatible fake model; ``.script(...)`` sets its answers."""
    model = FakeModel()
    try:
        yield model
    finally:
        model.close()


@pytest.fixture(scope="module")
def console_server() -> Iterator[Any]:
    with temporary_server("browser") as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    # Page conditions get time to come true on a loaded two-core CI machine.
    expect.set_options(timeout=default_http_timeout(15) * 1000)

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def console_errors() -> ConsoleErrors:
    return ConsoleErrors()


@pytest.fixture
def page(browser: Any, console_server: Any, console_errors: ConsoleErrors) -> Iterator[Any]:
    """A logged-in page (by the token URL) at 1280x800."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = watch(context.new_page(), console_errors)
    page.set_default_timeout(20_000)
    page.goto(f"{console_server.base_url}/?token={console_server.token}")
    page.wait_for_selector("body[data-ready]")
    try:
        yield page
    finally:
        context.close()
    assert list(console_errors) == []
