"""Closing a runtime leaves its views at the log's head.

A session closed right after its turns must leave a sessions view that
holds its head, so a later plain ``turnlog audit --verify`` sees events
removed from the end of its chain; a close that cannot wait that long
says so in the process's log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cli_support import remove_events, session_positions

import turnlog.projections.runner
from turnlog import Agent, Runtime, ScriptedModel


def run_and_close(url: str, turns: int = 3, **close: Any) -> Runtime:
    """Runs ``turns`` turns of session s1 and closes at once."""
    runtime = Runtime.open(url)
    try:
        model = ScriptedModel([f"answer {n}" for n in range(turns)])
        session = runtime.create_session(Agent("a", model=model), session_id="s1")
        for n in range(turns):
            assert session.prompt(f"question {n}", timeout=10).completed
    finally:
        runtime.close(**close)
    return runtime


def test_a_session_closed_right_after_its_turns_leaves_its_head_in_the_views(
    turnlog: Callable[..., Any], store_url: str
) -> None:
    run_and_close(store_url)
    positions = session_positions(store_url, "s1")
    remove_events(store_url, positions[-3:])

    verdict = turnlog("--store", store_url, "audit", "s1", "--verify")

    assert verdict.code == 1, verdict
    assert "FAILED, truncated" in verdict.out


def test_a_close_that_does_not_wait_leaves_the_views_to_the_next_runtime(
    turnlog: Callable[..., Any], store_url: str
) -> None:
    run_and_close(store_url, views_timeout=0.0)  # closes at once, whatever
    Runtime.open(store_url).close()  # the next runtime brings them up
    remove_events(store_url, session_positions(store_url, "s1")[-3:])

    verdict = turnlog("--store", store_url, "audit", "s1", "--verify")

    assert verdict.code == 1, verdict
    assert "FAILED, truncated" in verdict.out


def test_views_timeout_must_not_be_negative(store_url: str) -> None:
    runtime = Runtime.open(store_url)
    with pytest.raises(ValueError, match="views_timeout"):
        runtime.close(views_timeout=-1)
    runtime.close()


def test_closing_does_not_wait_out_the_followers_gathering(
    store_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # After a catch-up the follower gathers new events for a while before
    # the next; a closing runtime's events are all saved, so it must cut
    # that short rather than wait it out (here it would outlast the wait).
    monkeypatch.setattr(turnlog.projections.runner, "FOLLOW_INTERVAL", 60.0)
    run_and_close(store_url, views_timeout=20.0)
    assert "closing with the views" not in caplog.text
    assert session_positions(store_url, "s1")  # the views hold the session
