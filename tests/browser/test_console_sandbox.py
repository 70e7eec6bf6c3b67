"""The console warns when shell calls run without the sandbox."""

from __future__ import annotations

import re
from typing import Any

import pytest
from browser_support import ConsoleErrors, watch
from core_support import temporary_server
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_an_unavailable_sandbox_shows_a_badge(
    browser: Any, console_errors: ConsoleErrors, tmp_path: Any
) -> None:
    # TETHER_SANDBOX=auto with no bwrap on PATH: the server starts, unsandboxed.
    with temporary_server("browser-nosandbox", PATH=str(tmp_path)) as server:
        assert server.api_request("GET", "/api/healthz").json()["sandbox"] == "unavailable"
        context = browser.new_context()
        page = watch(context.new_page(), console_errors)
        page.goto(f"{server.base_url}/?token={server.token}")
        page.wait_for_selector("body[data-ready]")
        badge = page.locator("#sandbox-badge")
        expect(badge).to_be_visible()
        expect(badge).to_have_text("Sandbox unavailable")
        expect(badge).to_have_attribute("title", re.compile("install bubblewrap"))
        context.close()
    assert list(console_errors) == []
