"""The console in Chromium with an agent used as a tool: the child session
listed under the session (agent, call, tokens), its approval shown in the
chat as a card naming the child and decided from there."""

from __future__ import annotations

from console_support import new_session, page, send, sign_in
from playwright.sync_api import Page, expect

__all__ = ["page"]  # the fixture, used by name


def test_a_child_session_is_listed_and_its_approval_decided(serve, page: Page) -> None:
    from service_agents import delegating_agent

    served = serve({"lead": delegating_agent})
    sign_in(page, served.url)
    session_id = new_session(page)
    expect(page.locator("#children-box")).to_be_hidden()

    send(page, "go")
    child_id = f"{session_id}:1:ask"
    card = page.locator(".approval").filter(has_text=f"Child session {child_id}")
    expect(card.locator("h3")).to_have_text(
        f"Child session {child_id} is waiting for your approval"
    )
    expect(card.locator(".name")).to_have_text("publish")
    item = page.locator(f'#children li[data-session-id="{child_id}"]')
    expect(item).to_contain_text("publisher \u00b7 call ask \u00b7 running")

    request_id = card.get_attribute("data-request-id")
    card.locator("button.approve").click()
    decided = page.locator(f'.approval[data-request-id="{request_id}"]')
    expect(decided.locator(".outcome")).to_have_text("Approved by you.")
    expect(decided.locator("h3")).to_have_text("Approval decided")
    expect(page.locator(".mark")).to_have_text(["turn complete"])
    expect(item).to_contain_text("publisher \u00b7 call ask \u00b7 1 turn(s)")
    expect(page.locator("#children-usage")).to_contain_text("tokens by agent: ")
    expect(page.locator("#children-usage")).to_contain_text("publisher")

    # A click on the child shows its own timeline (read through the parent).
    item.locator(".sid").click()
    created = item.locator(".child-audit li").first
    expect(created.locator(".what")).to_have_text("SessionCreated")
    expect(created.locator(".line")).to_have_text(
        f"with agent publisher, route default, child of {session_id} (call ask)"
    )
    item.locator(".sid").click()
    expect(item.locator(".child-audit")).to_have_count(0)
