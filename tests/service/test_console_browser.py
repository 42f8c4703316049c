"""The web console in a real headless browser (Debian's chromium, driven by
Playwright): sign in, chat with streamed text, approve inline, reload mid-run
and see every event exactly once, and the audit's verify badge."""

from __future__ import annotations

import os
from typing import Any

from console_support import page
from playwright.sync_api import Page, expect
from service_support import TOKEN_A

from turnlog.domain.translation import EventTranslator
from turnlog.service.feed import read_entries

__all__ = ["page"]  # the fixture, used by name

SCREENSHOT = os.environ.get("TURNLOG_CONSOLE_SCREENSHOT")
"""A path to save a screenshot of the console at the end, to look at it."""


def log_ids(runtime: Any, session_id: str) -> list[str]:
    entries = read_entries(runtime.transcript, session_id, EventTranslator(session_id))
    return [entry.event_id for entry in entries]


def page_ids(page: Page) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        "#events li", "items => items.map(item => item.dataset.eventId)"
    )
    return ids


def send(page: Page, text: str) -> None:
    page.fill("#prompt-text", text)
    page.click("#send")


def test_chat_approve_reload_mid_run_and_audit(serve, page: Page) -> None:
    served = serve()
    page.goto(served.url + "/")
    page.fill("#token", TOKEN_A)
    page.click("#save-token")
    expect(page.locator("#status")).to_contain_text("signed in")
    page.click("#new-session")
    current = page.locator("#sessions li.current")
    expect(current).to_have_count(1)
    session_id = current.get_attribute("data-session-id") or ""
    assert session_id not in page.url  # nothing about the session or token in URLs

    # A prompt: the tool waits for approval, approved inline; the answer
    # streams in (deltas seen), then lands as the durable message.
    send(page, "count these words")
    page.locator(".approval:not(.decided) button.approve").click()
    answers = page.locator(".bubble.assistant[data-event-id]")
    expect(answers).to_have_text(["All done: counted and published."])
    assert int(page.locator("#chat").get_attribute("data-deltas") or 0) > 0
    expect(page.locator(".mark")).to_have_text(["turn complete"])

    # Another run; the page reloads while it waits on its approval.
    send(page, "and again")
    expect(page.locator(".approval:not(.decided)")).to_have_count(1)
    page.reload()
    expect(page.locator("#sessions li.current")).to_have_attribute(
        "data-session-id", session_id
    )
    pending = page.locator(".approval:not(.decided)")
    expect(pending).to_have_count(1)
    pending.locator("button.approve").click()
    expect(answers).to_have_count(2)
    expect(page.locator(".mark")).to_have_text(["turn complete", "turn complete"])
    assert int(page.locator("#chat").get_attribute("data-deltas") or 0) > 0
    expect(page.locator(".bubble.user")).to_have_text(
        ["count these words", "and again"]
    )

    # Every durable event of the log, once each, in log order.
    shown = page_ids(page)
    assert len(shown) == len(set(shown))
    assert shown == log_ids(served.runtime, session_id)

    page.click("#refresh-audit")
    expect(page.locator("#verify .badge.ok")).to_contain_text("verified")
    expect(page.locator("#timeline li").first).to_be_visible()
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT, full_page=True)
