"""The console in Chromium: "Edit and resend" rewinds before a message and
sends the new text, the turns set aside shown dimmed; "Fork from here"
opens the fork, and the fork tree links the source and its forks."""

from __future__ import annotations

import os

from console_support import new_session, page, send, sign_in
from playwright.sync_api import Page, expect

from turnlog.service import demo_agent

__all__ = ["page"]  # the fixture, used by name

SCREENSHOT = os.environ.get("TURNLOG_CONSOLE_LINEAGE_SCREENSHOT")


def test_edit_and_resend_then_fork_from_here(serve, page: Page) -> None:
    served = serve({"demo": demo_agent})
    sign_in(page, served.url)
    source = new_session(page)
    answers = page.locator(".bubble.assistant[data-event-id]")
    send(page, "one")
    expect(answers).to_have_count(1)
    send(page, "one two")
    expect(answers).to_have_text(
        ["Your message has 1 words.", "Your message has 2 words."]
    )
    expect(page.locator("#lineage-box")).to_be_hidden()

    # Edit and resend the second message: its turn is set aside, not gone.
    page.locator(".msg-actions").nth(1).locator("button.edit-resend").click()
    expect(page.locator("#editing")).to_contain_text("Editing message 2")
    expect(page.locator("#prompt-text")).to_have_value("one two")
    send(page, "a b c")
    expect(answers).to_have_count(3)
    expect(answers.nth(2)).to_have_text("Your message has 3 words.")
    expect(page.locator("#editing")).to_be_hidden()
    set_aside = page.locator(".bubble.set-aside")
    expect(set_aside).to_have_text(["one two", "Your message has 2 words."])
    expect(page.locator("#lineage li.rewind")).to_have_text(
        ["\u21ba turn(s) 2 set aside (back to after turn 1)"]
    )
    read = served.runtime.checkpoints.load(source, context=False)
    assert read is not None
    assert read.rewound_turns == (2,)
    # A message set aside offers no actions; the others do.
    expect(page.locator(".msg-actions:visible")).to_have_count(2)

    # Fork from before the edited message: the fork opens, with turn 1 only.
    page.locator(".msg-actions:visible").nth(1).locator("button.fork-here").click()
    current = page.locator("#sessions li.current")
    expect(current).not_to_have_attribute("data-session-id", source)
    fork = current.get_attribute("data-session-id")
    assert fork
    # The fork carries the turn its source had set aside, still set aside.
    expect(page.locator(".bubble.user:not(.set-aside)")).to_have_text(["one"])
    expect(page.locator(".bubble.user.set-aside")).to_have_text(["one two"])
    expect(page.locator(".bubble.assistant:not(.set-aside)")).to_have_text(
        ["Your message has 1 words."]
    )
    tree = page.locator("#lineage li")
    expect(tree.first).to_have_attribute("data-session-id", source)
    expect(page.locator("#lineage li.here")).to_have_attribute("data-session-id", fork)
    checkpoint = served.runtime.checkpoints.load(fork, context=False)
    assert checkpoint is not None
    assert checkpoint.forked_from is not None
    assert checkpoint.forked_from["session_id"] == source

    # The source's tree lists the fork; a click opens it again.
    tree.first.locator(".sid").click()
    expect(current).to_have_attribute("data-session-id", source)
    listed = page.locator(f'#lineage li[data-session-id="{fork}"]')
    expect(listed).to_contain_text("fork at position")
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT, full_page=True)
    listed.locator(".sid").click()
    expect(current).to_have_attribute("data-session-id", fork)
