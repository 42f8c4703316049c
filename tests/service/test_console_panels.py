"""The console's side panels in Chromium: the audit badge and timeline kept
current as events arrive (each event with its time, a one-line summary and
its payload on demand), and the chart of tokens and time per turn and per
model step, checked on the screenshot."""

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

from turnlog.service.overview import executions_report

__all__ = ["page"]  # the fixture, used by name

TOKENS_BLUE = (0x2F, 0x6F, 0xDE)
SECONDS_ORANGE = (0xE0, 0x7B, 0x00)


def test_the_audit_stays_current_and_reads_as_events(serve, page: Page) -> None:
    served = serve({"deployer": deploy_agent})
    sign_in(page, served.url)
    session_id = new_session(page)
    expect(page.locator("#verify .badge.ok")).to_have_text("verified \u2713 1 event")

    send(page, "tell me something")
    expect(page.locator(".mark")).to_have_text(["turn complete"])
    # Nobody clicks Verify: the badge and the timeline follow the log.
    events = len(served.runtime.transcript.all(session_id))
    assert events > 5
    expect(page.locator("#verify .badge.ok")).to_have_text(
        f"verified \u2713 {events} events"
    )
    rows = page.locator("#timeline > li")
    expect(rows).to_have_count(events)

    # Each event: its time, its name and a line a person can read.
    times = rows.locator(".when").all_inner_texts()
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", time) for time in times), times
    accepted = rows.filter(has=page.locator(".what", has_text="InputAccepted")).first
    expect(accepted.locator(".line")).to_have_text(
        "prompt: \u201ctell me something\u201d"
    )
    usage = rows.filter(has=page.locator(".what", has_text="UsageRecorded"))
    expect(usage.locator(".line")).to_have_text("232 tokens")
    completed = rows.filter(has=page.locator(".what", has_text="TurnCompleted"))
    expect(completed.locator(".line")).to_contain_text("turn 1: Line 1 of an answer.")

    # Unfolded, the recorded payload; it stays open as more events arrive.
    payload = accepted.locator("pre")
    expect(payload).to_be_hidden()
    accepted.locator("summary").click()
    expect(payload).to_be_visible()
    expect(payload).to_contain_text('"text": "tell me something"')
    expect(payload).to_contain_text('"kind": "prompt"')
    send(page, "once more")
    expect(page.locator(".mark")).to_have_count(2)
    events = len(served.runtime.transcript.all(session_id))
    expect(page.locator("#verify .badge.ok")).to_have_text(
        f"verified \u2713 {events} events"
    )
    expect(payload).to_be_visible()
    assert_inside(box_of(page.locator("#verify .badge")), viewport_box())
    screenshot(page, "audit-current")


def test_the_chart_draws_tokens_and_time_per_turn_and_step(serve, page: Page) -> None:
    served = serve({"deployer": deploy_agent})
    sign_in(page, served.url)
    session_id = new_session(page)
    send(page, "deploy the site")  # two model steps around an approval
    page.locator(".approval button.approve").click()
    expect(page.locator(".mark")).to_have_count(1)
    send(page, "and a longer question")  # one step
    expect(page.locator(".mark")).to_have_count(2)

    report = executions_report(served.app.state.turnlog, session_id, 20)
    steps = [step for turn in report["turns"] for step in turn["steps"]]
    assert [len(turn["steps"]) for turn in report["turns"]] == [2, 1]
    per_step = page.locator("#chart-steps g.bar")
    expect(per_step).to_have_count(3)
    expect(page.locator("#chart-turns g.bar")).to_have_count(2)
    # Each bar says what it stands for, from the executions view (and the
    # chart catches up with the log without anyone asking).
    expect(per_step.locator("title")).to_have_text(
        [
            f"Turn {turn['number']}, step {step['step']}, completed: "
            f"{step['usage']['total_tokens']} tokens, {step['seconds']:.3f} s"
            for turn in report["turns"]
            for step in turn["steps"]
        ]
    )
    # Bars as tall as their numbers: the most tokens, the tallest bar.
    heights = [
        float(rect.get_attribute("height") or 0)
        for rect in page.locator("#chart-steps rect.tokens").all()
    ]
    totals = [step["usage"]["total_tokens"] for step in steps]
    assert heights.index(max(heights)) == totals.index(max(totals))
    assert sorted(range(3), key=heights.__getitem__) == sorted(
        range(3), key=totals.__getitem__
    )

    # On screen: the chart is in view, and both colours are painted in it.
    chart = page.locator("#chart")
    expect(chart).to_be_visible()
    assert_inside(box_of(chart), viewport_box())
    shot = screenshot(page, "chart")
    for panel in ("#chart-turns", "#chart-steps"):
        area = box_of(page.locator(panel))
        assert shot.count(area, TOKENS_BLUE, tolerance=24) > 150, panel
        assert shot.count(area, SECONDS_ORANGE, tolerance=24) > 150, panel
