"""The web console, driven in headless Chromium against a real server and a fake model.

The tests share one server per module and build on each other in file order: the
provider added through the settings UI in the second test serves every chat after it."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from browser_support import ConsoleErrors, new_chat, screenshot, send, watch
from core_support import shell_call, wait_for
from mcp import types
from mcp_support import FIXTURE, modern_client
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

MOCK_PROVIDER = "browser-mock"


def _loop_command(lines: int, every: float = 0.2, ignore_term: bool = False) -> str:
    prelude = (
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else ""
    )
    script = (
        f"{prelude}import time\nfor i in range({lines}):\n"
        f"    print(f'tick {{i}}', flush=True)\n    time.sleep({every})"
    )
    return f"python -u -c {shlex.quote(script)}"


def _seconds(text: str) -> float:
    minutes = re.match(r"(\d+)m (\d+)s", text)
    if minutes:
        return int(minutes[1]) * 60 + int(minutes[2])
    return float(text.rstrip("s"))


def test_token_url_logs_in_with_a_cookie_and_cleans_the_url(
    browser: Any, console_server: Any, console_errors: ConsoleErrors
) -> None:
    context = browser.new_context()
    page = watch(context.new_page(), console_errors)
    page.goto(console_server.base_url + "/")
    expect(page.get_by_text("Open the URL printed by")).to_be_visible()

    page.goto(f"{console_server.base_url}/?token={console_server.token}")
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    assert page.url == console_server.base_url + "/"
    (cookie,) = [c for c in context.cookies() if c["name"] == "tether_token"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    stored = page.evaluate("JSON.stringify({...localStorage, ...sessionStorage})")
    assert console_server.token not in stored
    assert console_server.token not in page.content()
    context.close()
    assert list(console_errors) == []


def test_add_the_fake_provider_through_the_settings(page: Any, mock_llm: Any) -> None:
    page.get_by_role("button", name="Settings").click()
    form = page.locator("#provider-form")
    form.get_by_label("Id", exact=True).fill(MOCK_PROVIDER)
    form.get_by_label("Name", exact=True).fill("Browser mock")
    form.get_by_label("Base URL").fill(mock_llm.url)
    form.get_by_label("Model", exact=True).fill("mock-model")
    form.get_by_label("API key").fill("sk-browser")
    form.get_by_role("button", name="Add provider").click()

    row = page.locator(f'.provider[data-provider-id="{MOCK_PROVIDER}"]')
    expect(row).to_have_class(re.compile(r"\bactive\b"))
    expect(row.get_by_text("active: mock-model")).to_be_visible()
    row.get_by_role("button", name="Test connection").click()
    expect(row.locator(".test-result")).to_have_text(re.compile(r"^ok \(mock-model"))


def test_a_message_streams_its_answer_as_safe_markdown(page: Any, mock_llm: Any) -> None:
    mock_llm.script({"text": "Hello **world** <img src=x onerror=alert(1)> `code`"})
    new_chat(page)
    send(page, "Say hello")
    answer = page.locator(".msg.assistant:not(.streaming)").last
    expect(answer.locator("strong")).to_have_text("world")
    expect(answer).to_contain_text("<img src=x onerror=alert(1)>")
    assert answer.locator("img").count() == 0
    expect(page.locator("#session-list")).to_contain_text("Say hello")
    expect(page.get_by_label("Message")).to_have_value("")


def test_a_reload_that_changes_nothing_keeps_the_reader_s_selection(
    page: Any, mock_llm: Any
) -> None:
    """Reloading the conversation (a poll, a click on its session) redrew it even when
    nothing had changed, and a reader's selection went with the old nodes."""
    mock_llm.script({"text": "first answer"}, {"text": "second answer"})
    new_chat(page)
    send(page, "Keep it")
    conversation = page.locator("#messages")
    expect(conversation).not_to_have_attribute("aria-busy", "true")
    answer = page.locator(".msg.assistant p").last
    expect(answer).to_have_text("first answer")
    answer.evaluate("p => document.getSelection().selectAllChildren(p)")

    page.get_by_role("button", name="Keep it", exact=True).click()  # reloads the history
    expect(conversation).not_to_have_attribute("aria-busy", "true")
    assert page.evaluate("document.getSelection().toString()") == "first answer"

    send(page, "Go on")  # a change is drawn
    expect(page.locator(".msg.assistant p").last).to_have_text("second answer")
    expect(conversation).not_to_have_attribute("aria-busy", "true")
    expect(page.locator(".msg.user")).to_have_count(2)


def test_a_long_command_streams_live_then_gets_a_minute_and_goes_to_the_background(
    page: Any, mock_llm: Any
) -> None:
    mock_llm.script(
        shell_call(_loop_command(60), timeout=40),
        {"text": "It runs in the background now."},
        {"text": "The background command has finished."},
    )
    new_chat(page)
    send(page, "Count slowly")
    card = page.locator("#calls-in-flight .call").first
    expect(card).to_have_attribute("data-status", "running")
    output = card.locator(".call-output")
    expect(output).to_contain_text("tick 3")
    expect(output).not_to_contain_text("tick 40")  # the lines arrive while it runs
    inline = page.locator("#messages .call").first
    expect(inline.locator(".call-output")).to_contain_text("tick 3")
    screenshot(page, "chat-live-tool-call")

    kill = card.locator(".kill-remaining")
    expect(kill).to_have_text(re.compile(r"^\d+s$"))  # under a minute
    before = _seconds(kill.inner_text())
    card.get_by_role("button", name="+60 s").click()
    expect(card.locator(".kill-remaining")).to_have_text(re.compile(r"^\d+m \d+s$"))
    after = _seconds(kill.inner_text())
    assert after > before + 45

    card.get_by_role("button", name="Background").click()
    expect(
        page.locator(".msg.assistant").filter(has_text="It runs in the background now.")
    ).to_be_visible()
    expect(page.locator("#send")).to_be_enabled()
    expect(card).to_have_attribute("data-status", "offloaded")
    expect(output).to_contain_text("tick 20")

    note = page.locator(".msg.notification")
    expect(note).to_contain_text("tick 59", timeout=40_000)
    expect(
        page.locator(".msg.assistant").filter(has_text="The background command has finished.")
    ).to_be_visible()
    expect(card).to_have_attribute("data-end-state", "success")
    expect(output).to_contain_text("tick 59")


def test_cancel_ends_a_running_command_as_cancelled(page: Any, mock_llm: Any) -> None:
    mock_llm.script(
        shell_call(_loop_command(300), timeout=120), {"text": "Understood, it was cancelled."}
    )
    new_chat(page)
    send(page, "Run something long")
    card = page.locator("#calls-in-flight .call").first
    expect(card.locator(".call-output")).to_contain_text("tick 2")
    card.get_by_role("button", name="Cancel").click()
    expect(card).to_have_attribute("data-end-state", "cancelled")
    expect(card.locator(".call-state")).to_have_text("cancelled")
    expect(
        page.locator(".msg.assistant").filter(has_text="Understood, it was cancelled.")
    ).to_be_visible()
    inline = page.locator("#messages .call").first
    expect(inline).to_have_attribute("data-end-state", "cancelled")
    expect(inline.locator(".call-output")).to_contain_text("tick 2")
    # What the call used is on its card; the sandbox works here, so no warning badge.
    expect(inline.locator(".call-resources")).to_contain_text("stopped by cancel")
    expect(inline.locator(".call-resources")).to_contain_text("peak")
    expect(page.locator("#sandbox-badge")).to_be_hidden()


class _McpCall(threading.Thread):
    """A call another agent makes over ``/mcp`` with the official SDK, waiting on its
    request for the result as such a client does; ``result`` once it has ended."""

    def __init__(self, server: Any, session_id: str, command: str) -> None:
        super().__init__(daemon=True)
        self._server, self._session_id, self._command = server, session_id, command
        self.result: types.CallToolResult | None = None

    def run(self) -> None:
        self.result = asyncio.run(self._call())

    async def _call(self) -> types.CallToolResult:
        async with modern_client(self._server) as client:
            arguments = {"command": self._command, "session_id": self._session_id}
            return await client.call_tool("execute_shell_command", arguments)


def test_a_call_made_over_mcp_offers_no_background_button(
    page: Any, mock_llm: Any, console_server: Any
) -> None:
    """Another agent's call over /mcp into the chat's session waits on its request for
    the result, so it cannot go to the background: its card offers Cancel but no
    Background button, while the turn's own call offers both."""
    mock_llm.script(shell_call(_loop_command(600), timeout=120), {"text": "Both are done."})
    new_chat(page)
    send(page, "Count while another agent works")
    cards = page.locator("#calls-in-flight .call")
    expect(cards).to_have_count(1)
    session_id = page.evaluate("async () => (await import('/static/chat.js')).currentSessionId()")
    other = _McpCall(console_server, session_id, "echo from-mcp; sleep 120")
    other.start()
    try:
        expect(cards).to_have_count(2)
        theirs = cards.filter(has_text="from-mcp")
        ours = cards.filter(has_not_text="from-mcp")
        expect(theirs).to_have_attribute("data-status", "running")
        expect(ours.get_by_role("button", name="Background")).to_be_visible()
        expect(theirs.get_by_role("button", name="Background")).to_be_hidden()
        theirs.get_by_role("button", name="Cancel").click()
        expect(theirs).to_have_attribute("data-end-state", "cancelled")
    finally:
        other.join(60)
    assert not other.is_alive() and other.result is not None and other.result.is_error
    ours.get_by_role("button", name="Cancel").click()
    expect(page.locator(".msg.assistant").filter(has_text="Both are done.")).to_be_visible()


def test_many_calls_at_once_leave_the_buttons_working(page: Any, mock_llm: Any) -> None:
    """A browser keeps six connections to a host: with a stream per call, eight calls
    held them all and Cancel waited until the calls ended by themselves."""
    command = json.dumps({"command": _loop_command(150), "timeout": 120})
    mock_llm.script(
        {"tool_calls": [("execute_shell_command", command)] * 8}, {"text": "All stopped."}
    )
    new_chat(page)
    outputs: list[str] = []
    page.on("request", lambda r: outputs.append(r.url) if "/output" in r.url else None)
    page.evaluate(_COUNT_STREAMS)
    send(page, "Run eight things")
    cards = page.locator("#calls-in-flight .call")
    expect(cards).to_have_count(8)
    for index in range(8):  # streamed, or fetched now and then while no stream is free
        expect(cards.nth(index).locator(".call-output")).to_contain_text("tick 1")
    assert 1 <= page.evaluate("window.openStreams()") <= 2
    # The calls without a stream fetch the end of their output only, not all of it.
    assert outputs and all("tail=" in url for url in outputs)
    # Another session shown: this one's calls stop streaming (their connections free).
    new_chat(page)
    wait_for(lambda: page.evaluate("window.openStreams()") == 0, timeout=10)
    page.locator("#session-list .session-open").filter(has_text="Run eight things").click()
    expect(cards).to_have_count(8)
    last = cards.nth(7)
    last.get_by_role("button", name="Cancel").click()
    expect(last).to_have_attribute("data-end-state", "cancelled")
    page.locator("#stop").click()
    expect(page.locator("#stop")).to_be_hidden()
    for index in range(8):
        expect(cards.nth(index)).to_have_attribute("data-end-state", "cancelled")


# Counts the page's EventSources not yet closed (by the page or for good by the browser).
_COUNT_STREAMS = """() => {
  const Native = window.EventSource;
  const made = new Set();
  window.EventSource = class extends Native {
    constructor(...args) { super(...args); made.add(this); }
  };
  window.openStreams = () => [...made].filter((s) => s.readyState !== Native.CLOSED).length;
}"""


def test_a_strict_session_asks_and_the_approved_call_runs(
    page: Any, mock_llm: Any, console_server: Any
) -> None:
    command = "mkdir -p scratch && chmod -R 755 scratch && echo approved-run"
    mock_llm.script(shell_call(command, timeout=120), {"text": "The approved command ran."})
    new_chat(page)
    page.get_by_label("Approval level", exact=True).select_option("strict")
    send(page, "Prepare the scratch folder")

    card = page.locator("#approvals .approval")
    expect(card).to_be_visible()
    expect(card.locator(".approval-command")).to_have_text(command)
    expect(card.locator(".finding")).to_contain_text("chmod-chown-recursive")
    expect(card.locator(".time-left")).to_have_text(re.compile(r"\d+m \d+s left"))
    call = page.locator("#calls-in-flight .call").first
    expect(call).to_have_attribute("data-status", "awaiting_approval")
    screenshot(page, "approvals")

    card.get_by_role("button", name="Approve").click()
    expect(
        page.locator(".msg.assistant").filter(has_text="The approved command ran.")
    ).to_be_visible()
    expect(call).to_have_attribute("data-end-state", "success")
    expect(call.locator(".call-output")).to_contain_text("approved-run")
    expect(page.locator("#approvals .approval")).to_have_count(0)
    session = page.locator("#session-list [aria-current=true]").inner_text()
    sessions = console_server.api_request("GET", "/api/chats").json()
    (chosen,) = [s for s in sessions if s["name"] == session]
    assert chosen["approval_level"] == "strict"


def test_a_denied_call_never_runs_and_ends_denied(
    page: Any, mock_llm: Any, console_server: Any
) -> None:
    mock_llm.script(
        shell_call("echo should-never-run", timeout=120), {"text": "Denied, moving on."}
    )
    new_chat(page)
    page.get_by_label("Approval level", exact=True).select_option("strict")
    send(page, "Try something")
    card = page.locator("#approvals .approval")
    card.get_by_role("button", name="Deny").click()
    expect(page.locator(".msg.assistant").filter(has_text="Denied, moving on.")).to_be_visible()
    call = page.locator("#messages .call").first
    expect(call).to_have_attribute("data-end-state", "denied")
    expect(page.locator("#approvals .approval")).to_have_count(0)


def test_the_card_shows_the_pattern_first_and_a_similar_approval_is_remembered(
    page: Any, mock_llm: Any
) -> None:
    mock_llm.script(
        shell_call("echo remember me", timeout=120),
        {"text": "First echo done."},
        shell_call("echo remember you", timeout=120),
        {"text": "Second echo done."},
    )
    new_chat(page)
    page.get_by_label("Approval level", exact=True).select_option("strict")
    send(page, "Echo twice")

    card = page.locator("#approvals .approval")
    expect(card.locator(".approval-pattern")).to_contain_text("echo remember *")
    card.locator(".approval-scope").select_option("similar:session")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator(".msg.assistant").filter(has_text="First echo done.")).to_be_visible()
    expect(page.locator("#stop")).to_be_hidden()  # the turn has ended
    send(page, "Again")
    expect(page.locator(".msg.assistant").filter(has_text="Second echo done.")).to_be_visible()
    expect(page.locator("#approvals .approval")).to_have_count(0)

    page.get_by_role("button", name="Settings").click()
    row = page.locator("#remembered-list .remembered")
    expect(row).to_contain_text("echo remember *")
    row.get_by_role("button", name="Revoke").click()
    expect(page.locator("#remembered-list .remembered")).to_have_count(0)


# Stand-ins the page gets before its scripts run: a tab that can be hidden on demand and
# notifications that are recorded instead of shown.
_HIDDEN_TAB_AND_NOTIFICATIONS = """
window.__hidden = false;
window.__notes = [];
Object.defineProperty(document, "hidden", { get: () => window.__hidden, configurable: true });
window.Notification = class {
  static permission = "granted";
  static requestPermission() { return Promise.resolve("granted"); }
  constructor(title, options) { window.__notes.push({ title, body: options.body }); }
};
"""


def test_the_inbox_shows_other_sessions_and_a_hidden_tab_is_notified(
    page: Any, mock_llm: Any, console_server: Any
) -> None:
    page.add_init_script(_HIDDEN_TAB_AND_NOTIFICATIONS)
    page.reload()
    page.wait_for_selector("body[data-ready]")
    # The inbox has been read once: what waited before the page opened is not news.
    expect(page.locator("#approvals-inbox .empty")).to_be_visible()
    page.evaluate("window.__hidden = true")
    mock_llm.script(shell_call("echo from elsewhere", timeout=120), {"text": "Elsewhere done."})
    body = {
        "session_id": "api:elsewhere",
        "input": [{"role": "user", "content": "go"}],
        "request_context": {"approval_level": "strict"},
    }
    resp = console_server.api_request("POST", "/api/console/chat/task", json=body)
    assert resp.status_code == 200, resp.text

    page.wait_for_function("() => window.__notes.length === 1")
    note = page.evaluate("window.__notes[0]")
    assert note == {
        "title": "Tether: approval needed",
        "body": "api:elsewhere: echo from elsewhere",
    }
    page.evaluate("window.__hidden = false")
    card = page.locator("#approvals-inbox .approval")
    expect(card.locator(".approval-session")).to_contain_text("api:elsewhere")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator("#approvals-inbox .approval")).to_have_count(0)
    expect(page.locator("#approvals-inbox .empty")).to_be_visible()
    task_path = f"/api/console/chat/task/{resp.json()['task_id']}"
    # The turn ends before the next test scripts the shared model.
    wait_for(
        lambda: console_server.api_request("GET", task_path).json()["status"] == "finished",
        what="the approved turn to finish",
    )


def test_force_kill_ends_a_command_at_once(page: Any, mock_llm: Any, console_server: Any) -> None:
    mock_llm.script(
        shell_call(_loop_command(300, ignore_term=True), timeout=120), {"text": "Killed it."}
    )
    new_chat(page)
    send(page, "Run a stubborn command")
    card = page.locator("#calls-in-flight .call").first
    expect(card.locator(".call-output")).to_contain_text("tick 1")
    card.get_by_role("button", name="Force kill").click()
    expect(card).to_have_attribute("data-end-state", "cancelled")
    expect(page.locator(".msg.assistant").filter(has_text="Killed it.")).to_be_visible()
    sessions = console_server.api_request("GET", "/api/chats").json()
    (sid,) = [s["id"] for s in sessions if s["name"] == "Run a stubborn command"]
    call_id = card.get_attribute("data-call-id")
    info = console_server.api_request("GET", f"/api/tool-calls/{sid}/{call_id}").json()
    assert info["force_cancelled"] is True


def test_cron_jobs_are_created_paused_resumed_and_run_from_the_settings(
    page: Any, mock_llm: Any
) -> None:
    mock_llm.script({"text": "Morning report done."})
    page.get_by_role("button", name="Settings").click()
    form = page.locator("#cron-form")
    form.get_by_label("Name").fill("Morning report")
    form.get_by_label("Schedule (5-field cron)").fill("0 9 * * 1-5")
    form.get_by_label("Prompt").fill("Write the morning report")
    form.get_by_role("button", name="Create job").click()

    job = page.locator(".job").filter(has_text="Morning report")
    expect(job.locator(".badge")).to_have_text("active")
    expect(job.locator(".job-next")).to_contain_text("next")
    job.get_by_role("button", name="Pause").click()
    expect(job.locator(".badge")).to_have_text("paused")
    job.get_by_role("button", name="Resume").click()
    expect(job.locator(".badge")).to_have_text("active")
    job.get_by_role("button", name="Run now").click()
    history = job.locator(".job-history")
    expect(history.locator(".job-run[data-status=success]")).to_have_count(1)
    screenshot(page, "settings")


def test_an_mcp_server_is_added_its_tools_chosen_disabled_and_removed(
    page: Any, console_server: Any, tmp_path: Path
) -> None:
    page.get_by_role("button", name="Settings").click()
    form = page.locator("#mcp-form")
    form.get_by_label("Key (tools appear as key__tool)").fill("fixture")
    form.get_by_label("Name", exact=True).fill("Fixture server")
    form.get_by_label("Command (stdio)").fill(sys.executable)
    form.get_by_label("Arguments (stdio, one per line)").fill(f"{FIXTURE}\nstdio\n{tmp_path}")
    form.get_by_label("Environment (stdio) or headers (HTTP)").fill("FIXTURE_TOKEN=s3cret-value")
    form.get_by_role("button", name="Add server").click()

    card = page.locator(".mcp-client").filter(has_text="Fixture server")
    expect(card).to_be_visible()
    expect(card).not_to_contain_text("s3cret-value")
    # The section refreshes itself while the server connects.
    expect(card.locator(".badge[data-status]")).to_have_text("ready")
    expect(card).to_contain_text("tools")
    card.get_by_role("button", name="Tools").click()
    card.get_by_label("hidden").uncheck()
    card.get_by_role("button", name="Save tool list").click()
    # The click only starts the request; the status line says when it has been answered.
    expect(page.locator("#status")).to_have_text("Tools of Fixture server saved.")
    tools = console_server.api_request("GET", "/api/mcp/fixture").json()["tools"]
    assert tools is not None and "hidden" not in tools and "echo" in tools
    card.get_by_role("button", name="Disable").click()
    expect(card.locator(".badge[data-status]")).to_have_text("disabled")
    card.get_by_role("button", name="Remove").click()
    expect(page.locator(".mcp-client")).to_have_count(0)


def test_the_console_fits_a_phone_screen(
    browser: Any, console_server: Any, console_errors: ConsoleErrors
) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = watch(context.new_page(), console_errors)
    page.goto(f"{console_server.base_url}/?token={console_server.token}")
    page.wait_for_selector("body[data-ready]")
    for view in ("Chat", "Settings"):
        page.get_by_role("button", name=view, exact=True).click()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{view} is wider than the screen by {overflow}px"
    page.get_by_role("button", name="Chat", exact=True).click()
    page.locator("#session-list .session-open").first.click()
    expect(page.locator(".msg").first).to_be_visible()
    screenshot(page, "phone-chat")
    context.close()
    assert list(console_errors) == []


def test_sessions_switch_and_delete_by_keyboard(page: Any) -> None:
    session = page.get_by_role("button", name="Say hello", exact=True)
    session.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#conv-title")).to_have_text("Say hello")
    expect(page.locator(".msg.assistant strong")).to_have_text("world")

    page.get_by_role("button", name="Delete session Say hello").focus()
    page.keyboard.press("Enter")
    expect(session).to_have_count(0)
    expect(page.locator("#conv-title")).to_have_text("New chat")
    expect(page.get_by_label("Message")).to_be_focused()


def test_reasoning_is_shown_folded_above_the_answer(page: Any, mock_llm: Any) -> None:
    mock_llm.script({"text": "The answer is 4.", "reasoning": "Two plus two <b>is</b> four."})
    new_chat(page)
    send(page, "What is 2+2?")
    answer = page.locator(".msg.assistant:not(.streaming)").last
    expect(answer).to_contain_text("The answer is 4.")
    box = answer.locator("details.reasoning")
    expect(box.locator("summary")).to_have_text("Reasoning")
    expect(box.locator(".reasoning-text")).to_be_hidden()
    box.locator("summary").click()
    # Shown as text, never as markup.
    expect(box.locator(".reasoning-text")).to_have_text("Two plus two <b>is</b> four.")
    assert box.locator("b").count() == 0


def test_a_call_the_model_named_with_a_path_shows_its_output_and_cancels(
    page: Any, mock_llm: Any
) -> None:
    # The model's id "a/b" would make a broken route; the card uses Tether's own id.
    odd = {**shell_call(_loop_command(300), timeout=120), "ids": ["a/b"]}
    mock_llm.script(odd, {"text": "Stopped the odd one."})
    new_chat(page)
    send(page, "Run with an odd id")
    inline = page.locator("#messages .call").first
    expect(inline.locator(".call-output")).to_contain_text("tick 2")
    assert "/" not in (inline.get_attribute("data-call-id") or "/")
    inline.get_by_role("button", name="Cancel").click()
    expect(inline).to_have_attribute("data-end-state", "cancelled")
    expect(page.locator(".msg.assistant").filter(has_text="Stopped the odd one.")).to_be_visible()
