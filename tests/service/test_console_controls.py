"""The console's controls as a person meets them, in Chromium: the session
list says where each session stands and how it began, New session offers
the agents, errors show beside the control that failed, and the page asks
the server for nothing that is not there (no favicon 404)."""

from __future__ import annotations

import threading

from console_support import (
    HeldModel,
    assert_inside,
    box_of,
    deploy_agent,
    failing_agent,
    new_session,
    page,
    screenshot,
    send,
    sign_in,
    viewport_box,
)
from playwright.sync_api import Page, Response, expect
from service_support import TOKEN_B

from turnlog import Agent

__all__ = ["page"]  # the fixture, used by name

NOTICE_RED = (0xC0, 0x39, 0x2B)


def test_the_session_list_shows_state_and_first_prompt(serve, page: Page) -> None:
    release = threading.Event()
    served = serve(
        {
            "deployer": deploy_agent,
            "failing": failing_agent,
            "held": lambda: Agent("held", model=HeldModel(release)),
        },
        default_agent="deployer",
    )
    try:
        with served.client() as client:

            def start(agent: str, prompt: str) -> None:
                created = client.post("/sessions", json={"agent": agent})
                session_id = created.json()["session_id"]
                answer = client.post(
                    f"/sessions/{session_id}/prompts", json={"text": prompt}
                )
                assert answer.status_code in (200, 202), answer.text

            start("deployer", "tell me something")
            start("failing", "summarise the report")
            start("deployer", "deploy the site to staging")
            start("held", "think about it for a while")
        sign_in(page, served.url)
        items = page.locator("#sessions li")
        # Newest first; each with its first prompt and its state in words.
        expect(items.locator(".first-prompt")).to_have_text(
            [
                "think about it for a while",
                "deploy the site to staging",
                "summarise the report",
                "tell me something",
            ]
        )
        expect(items.locator(".state")).to_have_text(
            ["running", "waiting for approval", "failed", "idle"]
        )
        for item in items.all():
            assert_inside(box_of(item.locator(".state")), box_of(item))
            assert_inside(box_of(item), viewport_box())
        shot = screenshot(page, "session-list")
        failed = box_of(items.nth(2).locator(".state"))
        assert shot.count(failed, NOTICE_RED, tolerance=8) > 300  # red "failed"

        # States follow the sessions: approving the waiting one makes it idle.
        items.nth(1).click()
        page.locator(".approval button.approve").click()
        expect(items.nth(1).locator(".state")).to_have_text("idle")
        # A new session is listed first, with no prompt yet.
        new_session(page, "deployer")
        expect(items.first.locator(".first-prompt")).to_have_text("no prompt yet")
        send(page, "hello")
        expect(items.first.locator(".first-prompt")).to_have_text("hello")
    finally:
        release.set()


def test_new_session_offers_the_agents(serve, page: Page) -> None:
    served = serve({"deployer": deploy_agent, "failing": failing_agent})
    sign_in(page, served.url)
    expect(page.locator("#status")).to_contain_text("signed in")
    page.click("#new-session")
    menu = page.locator("#agent-menu")
    expect(menu).to_be_visible()
    expect(menu).to_contain_text("Start a session with which agent?")
    expect(menu.locator("button")).to_have_text(["deployer", "failing"])
    assert_inside(box_of(menu), viewport_box())
    screenshot(page, "agent-menu")
    menu.locator("button", has_text="failing").click()
    expect(menu).to_be_hidden()
    current = page.locator("#sessions li.current")
    expect(current).to_have_count(1)
    expect(current.locator(".meta")).to_contain_text("failing")
    expect(page.locator("#notice")).to_be_hidden()
    session_id = current.get_attribute("data-session-id")
    with served.client() as client:
        assert client.get(f"/sessions/{session_id}").json()["agent_name"] == "failing"

    # Escape closes the menu without starting anything; the default is marked.
    page.click("#new-session")
    expect(menu).to_be_visible()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(page.locator("#sessions li")).to_have_count(1)
    marked = serve(
        {"deployer": deploy_agent, "failing": failing_agent}, default_agent="deployer"
    )
    sign_in(page, marked.url)
    page.click("#new-session")
    expect(menu.locator("button")).to_have_text(["deployer (default)", "failing"])


def test_errors_show_beside_the_control_and_nothing_is_missing(
    serve, page: Page
) -> None:
    served = serve({"deployer": deploy_agent})
    missing: list[str] = []

    def note(response: Response) -> None:
        if response.status == 404:
            missing.append(response.url)

    page.on("response", note)
    sign_in(page, served.url, token="not-a-token-of-anyone")
    notice = page.locator("#notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("The token was not accepted (401)")
    # Beside the button pressed, on screen, in red.
    button = box_of(page.locator("#save-token"))
    where = box_of(notice)
    assert_inside(where, viewport_box())
    assert 0 <= where["y"] - (button["y"] + button["height"]) <= 20
    assert abs(where["x"] - button["x"]) <= 20
    shot = screenshot(page, "error-token")
    assert shot.count(where, NOTICE_RED, tolerance=30) > 300

    sign_in(page, served.url)
    expect(notice).to_be_hidden()
    new_session(page)
    send(page, "deploy the site")
    expect(page.locator(".approval:not(.decided)")).to_have_count(1)
    # A prompt while the turn waits: refused (409), and said above the box.
    send(page, "are you there?")
    expect(page.locator("#notice-text")).to_have_text(
        "Not sent: The agent is still busy with this session: "
        "it waits for your approval above."
    )
    where = box_of(notice)
    box = box_of(page.locator("#prompt-text"))
    assert_inside(where, viewport_box())
    assert 0 <= box["y"] - (where["y"] + where["height"]) <= 20
    screenshot(page, "error-busy")
    page.locator("#notice-close").click()
    expect(notice).to_be_hidden()

    page.reload()
    expect(page.locator(".approval:not(.decided)")).to_have_count(1)
    icon = page.locator("link[rel=icon]")
    assert (icon.get_attribute("href") or "").startswith("data:")
    assert missing == []

    # Another tenant's token in the same tab: that session is not theirs,
    # and the page says so instead of retrying the stream for ever.
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/events" in r.url else None)
    page.fill("#token", TOKEN_B)
    page.click("#save-token")
    expect(page.locator("#notice-text")).to_have_text(
        "This session is not one of this token's: choose another on the left."
    )
    expect(page.locator("#sessions li")).to_have_count(0)
    page.wait_for_timeout(1500)  # the page's own retry would come after 1 s
    assert len(streams) == 1
