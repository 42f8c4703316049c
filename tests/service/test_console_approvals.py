"""The console's approval card as a person reads it, in Chromium: what is
asked in words, the arguments laid out, who decided what, and a waiting
card in view after a reload (checked on the screenshot, not the DOM)."""

from __future__ import annotations

import re

from console_support import (
    assert_inside,
    box_of,
    deploy_agent,
    new_session,
    page,
    screenshot,
    send,
    sign_in,
    viewport_box,
)
from playwright.sync_api import Page, expect

__all__ = ["page"]  # the fixture, used by name


def test_the_card_says_what_is_asked_and_who_decided(serve, page: Page) -> None:
    served = serve({"deployer": deploy_agent})
    sign_in(page, served.url)
    session_id = new_session(page)

    send(page, "deploy the site")
    card = page.locator(".approval")
    expect(card.locator("h3")).to_have_text(
        re.compile("The agent is waiting for your approval")
    )
    expect(card).to_contain_text("It asks to run the tool deploy with these arguments:")
    # The arguments laid out as "key: value", nested ones unfolded here:
    # the person sees everything they approve.
    args = card.locator("dl.args").first
    expect(args.locator("> dt")).to_have_text(["target:", "options:"])
    expect(args.locator("> dd").first).to_have_text("staging")
    expect(card.locator("details dl.args > dt")).to_have_text(
        ["replicas:", "regions:", "1:", "2:"]
    )
    expect(card.locator("details dl.args dd").nth(0)).to_have_text("3")
    assert '{"target"' not in card.inner_text()  # no raw JSON

    # On screen, not only in the DOM: inside the chat's visible area, and
    # the Approve button's blue is painted where the button is.
    approve = card.locator("button.approve")
    assert_inside(box_of(card), box_of(page.locator("#chat")))
    shot = screenshot(page, "approval-waiting")
    assert shot.count(box_of(approve), (0x2F, 0x6F, 0xDE)) > 200

    approve.click()
    expect(card).to_have_class(re.compile("decided"))
    expect(card.locator(".outcome")).to_have_text("Approved by you.")
    expect(card.locator("button.approve")).to_be_hidden()
    expect(page.locator(".bubble.assistant[data-event-id]")).to_have_text(["Deployed."])

    # The tool call that ran shows its arguments laid out too, nested ones
    # folded until asked for.
    call = page.locator("details.tool").filter(has_text="calls deploy")
    expect(call.locator("dl.args > dt").first).to_have_text("target:")
    nested = call.locator("dl.args > dd > details").first
    expect(nested.locator("> summary")).to_have_text("2 fields")
    expect(nested.locator("dt").first).to_be_hidden()
    nested.locator("> summary").click()
    expect(nested.locator("dt").first).to_have_text("replicas:")
    expect(nested.locator("dt").first).to_be_visible()

    # Decided elsewhere (another person, through the API): the card says so.
    send(page, "deploy again")
    waiting = page.locator(".approval:not(.decided)")
    expect(waiting).to_have_count(1)
    request_id = waiting.get_attribute("data-request-id")
    with served.client() as http:
        answer = http.post(
            f"/sessions/{session_id}/approvals/{request_id}", json={"decision": "deny"}
        )
        assert answer.status_code == 200, answer.text
    denied = page.locator(f'.approval[data-request-id="{request_id}"]')
    expect(denied.locator(".outcome")).to_have_text(
        "Denied by a person using this service."
    )
    expect(denied).to_have_class(re.compile("denied"))
    screenshot(page, "approval-decided")


def test_a_waiting_card_is_in_view_after_a_reload(serve, page: Page) -> None:
    served = serve({"deployer": deploy_agent})
    sign_in(page, served.url)
    new_session(page)
    # Enough answers that the chat scrolls: the card is far below its top.
    for n in range(4):
        send(page, f"tell me something {n}")
        expect(page.locator(".mark")).to_have_count(n + 1)
    send(page, "deploy the site")
    expect(page.locator(".approval:not(.decided)")).to_have_count(1)
    chat = page.locator("#chat")
    assert chat.evaluate("c => c.scrollHeight > c.clientHeight + 200")

    page.reload()
    card = page.locator(".approval:not(.decided)")
    expect(card.locator("button.deny")).to_be_visible()
    expect(page.locator(".mark")).to_have_count(4)  # the whole history is back
    # Checked without any scrolling by the test (a click would scroll):
    # the card, buttons included, is inside the chat's visible area and
    # the viewport, and its amber border and blue button are on screen.
    page.wait_for_function(
        """() => { const c = document.querySelector('.approval:not(.decided)');
                   const chat = document.getElementById('chat');
                   const a = c.getBoundingClientRect();
                   const b = chat.getBoundingClientRect();
                   return a.top >= b.top && a.bottom <= b.bottom; }"""
    )
    assert_inside(box_of(card), box_of(chat))
    assert_inside(box_of(card), viewport_box())
    shot = screenshot(page, "approval-after-reload")
    assert shot.count(box_of(card.locator("button.approve")), (0x2F, 0x6F, 0xDE)) > 200
    assert shot.count(box_of(card), (0xB7, 0x79, 0x1F), tolerance=30) > 100

    request_id = card.get_attribute("data-request-id")
    card.locator("button.allow-session").click()
    decided = page.locator(f'.approval[data-request-id="{request_id}"]')
    expect(decided.locator(".outcome")).to_have_text(
        "Approved for the rest of this session by you."
    )
