"""The console against hostile text: an answer built to run code, mislead or freeze the
page, and commands and titles hiding what they do behind bidi and invisible characters.
Real server, fake model, headless Chromium."""

from __future__ import annotations

import time
from typing import Any

import pytest
from browser_support import new_chat, send
from core_support import FakeModel, shell_call
from helpers import default_http_timeout, register_mock_provider
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

# Shows as one harmless echo; bash runs the rm.
DISGUISED = 'echo "ok\u2067"; rm ./notes.txt; #\u2069'
SLOW_LINKS = "[a](b" * 100_000  # 500 kB that made the old link pattern backtrack
HOSTILE_ANSWER = "\n\n".join(
    [
        "# Report <script>window.__pwned = 'script'</script>",
        "<img src=x onerror=\"window.__pwned = 'img'\"> **bold** and *em*",
        "[run me](javascript:window.__pwned='link') and [docs](https://example.com/docs)",
        f"Run `{DISGUISED}` to check.",
        "```\n</pre><iframe src=javascript:window.__pwned='iframe'></iframe>\n```",
        f"tail {SLOW_LINKS} end-of-answer",
    ]
)


@pytest.fixture(scope="module", autouse=True)
def provider(console_server: Any, mock_llm: FakeModel) -> None:
    register_mock_provider(console_server, mock_llm.url)


def _assert_typing_works_quickly(page: Any) -> None:
    """Keys reach the message box within a bounded wait (a busy page queues them)."""
    box = page.get_by_label("Message")
    box.click()
    started = time.monotonic()
    page.keyboard.type("still here")
    expect(box).to_have_value("still here", timeout=default_http_timeout(5) * 1000)
    elapsed = time.monotonic() - started
    assert elapsed < default_http_timeout(5), f"typing took {elapsed:.1f}s"
    box.fill("")


def test_a_hostile_answer_runs_nothing_and_the_page_stays_usable(
    page: Any, mock_llm: FakeModel
) -> None:
    mock_llm.script({"text": HOSTILE_ANSWER})
    new_chat(page)
    send(page, "Write the report")
    answer = page.locator(".msg.assistant:not(.streaming)").last
    expect(answer.locator("h3")).to_contain_text("Report <script>")
    _assert_typing_works_quickly(page)
    expect(page.locator(".md[data-rendering]")).to_have_count(0)
    expect(answer).to_contain_text("end-of-answer")

    assert page.evaluate("window.__pwned") is None
    assert answer.locator("script, img, iframe").count() == 0
    expect(answer.locator("strong")).to_have_text("bold")
    links = answer.locator("a")
    expect(links).to_have_count(1)
    expect(links).to_have_attribute("href", "https://example.com/docs")
    expect(links).to_have_attribute("rel", "noopener noreferrer")
    expect(answer).to_contain_text("[run me](javascript:")
    # The command in the answer shows what it hides.
    code = answer.locator("code").filter(has_text="rm ./notes.txt")
    expect(code.locator("mark.hidden-char")).to_have_text(["⟦U+2067 RLI⟧", "⟦U+2069 PDI⟧"])

    # The newest session opens when the page loads, and draws the answer again.
    page.reload()
    page.wait_for_selector("body[data-ready]")
    expect(page.locator("#conv-title")).to_have_text("Write the report")
    _assert_typing_works_quickly(page)
    expect(page.locator(".msg.assistant").last).to_contain_text("end-of-answer")
    assert page.evaluate("window.__pwned") is None


def test_an_approval_shows_the_hidden_characters_and_why_it_asks(
    page: Any, mock_llm: FakeModel, console_server: Any
) -> None:
    notes = console_server.home / "workspace" / "notes.txt"
    notes.write_text("keep me")
    mock_llm.script(shell_call(DISGUISED, timeout=120), {"text": "Denied, so nothing ran."})
    new_chat(page)
    # The server's default level (auto) asks only because of the finding.
    send(page, "Tidy up\u202e txt.exe")

    card = page.locator("#approvals .approval")
    command = card.locator(".approval-command")
    expect(command.locator("mark.hidden-char")).to_have_text(["⟦U+2067 RLI⟧", "⟦U+2069 PDI⟧"])
    expect(command).to_contain_text("rm ./notes.txt")
    finding = card.locator(".finding").filter(has_text="text-bidi-control")
    expect(finding.locator(".severity")).to_have_text("HIGH")
    expect(finding).to_contain_text("U+2067 RIGHT-TO-LEFT ISOLATE")

    call = page.locator("#calls-in-flight .call").first
    expect(call.locator(".call-args mark.hidden-char")).to_have_count(2)
    for title in (page.locator("#conv-title"), page.locator("#session-list [aria-current=true]")):
        expect(title.locator("mark.hidden-char")).to_have_text("⟦U+202E RLO⟧")

    card.get_by_role("button", name="Deny").click()
    expect(
        page.locator(".msg.assistant").filter(has_text="Denied, so nothing ran.")
    ).to_be_visible()
    expect(page.locator("#messages .call").first).to_have_attribute("data-end-state", "denied")
    assert notes.read_text() == "keep me"


def test_a_finished_calls_huge_output_is_drawn_as_its_tail(page: Any, mock_llm: FakeModel) -> None:
    """A call may store 16 MiB of output; a reload drew all of it and froze the page."""
    big = "python3 -c \"import sys; sys.stdout.write(('x' * 99 + '\\n') * 30_000)\"; echo last-line"
    mock_llm.script(shell_call(big), {"text": "printed a lot"})
    new_chat(page)
    send(page, "Print three megabytes")
    expect(page.locator(".msg.assistant").filter(has_text="printed a lot")).to_be_visible()
    page.reload()
    page.wait_for_selector("body[data-ready]")
    card = page.locator("#messages .call").first
    with page.expect_response(lambda r: "/output" in r.url) as fetched:
        card.locator("summary").first.click()
    output = card.locator(".call-output")
    expect(output).to_contain_text("earlier output not shown here")
    expect(output).to_contain_text("last-line")
    assert len(output.text_content() or "") < 200_000
    # Only the end it shows crossed the network, not the three megabytes.
    assert len(fetched.value.body()) < 200_000
    _assert_typing_works_quickly(page)


def test_right_to_left_text_with_brackets_leaves_the_page_usable(
    page: Any, mock_llm: FakeModel
) -> None:
    """Unmatched brackets beside right-to-left letters make Chromium's bidi layout cost
    the square of a paragraph's length: 300 kB froze the page 10-17 s, in the answer
    and in a call's output alike."""
    hostile = "(a\u05d0]" * 60_000
    mock_llm.script(shell_call("python3 -c \"print('(a\\u05d0]' * 60_000)\""), {"text": hostile})
    new_chat(page)
    send(page, "Say it")
    answer = page.locator(".msg.assistant").last
    expect(answer).to_contain_text("(a\u05d0]" * 3)
    _assert_typing_works_quickly(page)
    page.reload()
    page.wait_for_selector("body[data-ready]")
    _assert_typing_works_quickly(page)


def test_a_long_list_of_short_lines_leaves_the_page_usable(page: Any, mock_llm: FakeModel) -> None:
    """Markdown yielded only inside long lines: 200,000 short lines in one paragraph or
    one list drew in one go, on every reload."""
    items = "\n".join(f"- item {i}" for i in range(100_000))
    mock_llm.script({"text": f"{items}\n\nend-of-list"})
    new_chat(page)
    send(page, "List them")
    _assert_typing_works_quickly(page)
    answer = page.locator(".msg.assistant").last
    # Counted, not read: the answer's megabyte of text, fetched on every poll, slowed
    # the page it was waiting for.
    expect(answer.locator("li")).to_have_count(100_000, timeout=60_000)
    expect(answer.locator("p").last).to_have_text("end-of-list")


def test_copying_a_long_line_gives_it_back_whole(page: Any, mock_llm: FakeModel) -> None:
    """The page draws a long line in boxes of its own (see the bidi test above); a copy
    gave every box a line, breaking the line in two wherever a box ended."""
    line = "".join(f"{i:05d}" for i in range(1200))  # 6,000 characters, no space
    answer_text = f"{line}\nand a second line"
    mock_llm.script({"text": answer_text})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    new_chat(page)
    send(page, "Say it")
    # Settled: the streamed answer is redrawn from the history once the turn ends, and
    # a selection made in the streamed one would be gone.
    expect(page.locator("#messages")).not_to_have_attribute("aria-busy", "true")
    paragraph = page.locator(".msg.assistant p").last
    expect(paragraph).to_contain_text("and a second line")
    assert paragraph.locator(".run").count() > 1  # drawn in boxes
    paragraph.evaluate(
        """p => {
            document.activeElement?.blur();  // as a mouse selection moves the focus
            const range = document.createRange();
            range.selectNodeContents(p);
            document.getSelection().removeAllRanges();
            document.getSelection().addRange(range);
        }"""
    )
    page.keyboard.press("Control+C")
    assert page.evaluate("navigator.clipboard.readText()") == answer_text
