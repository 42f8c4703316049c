"""A log with a few finished sessions, for the view tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


def fill_log(url: str, sessions: int = 3, turns: int = 3) -> None:
    """Runs ``sessions`` sessions of ``turns`` tool-calling turns into ``url``."""
    with Runtime.open(url) as rt:
        for index in range(sessions):
            model = ScriptedModel()
            for turn in range(turns):
                model.add(
                    calls(tool_call("lookup", {"key": f"k{turn}"})), f"answer {turn}"
                )
            session = rt.create_session(
                Agent("a", model=model, tools=[lookup]), session_id=f"s{index}"
            )
            for turn in range(turns):
                session.prompt(f"question {turn}", timeout=10)
        rt.projections.catch_up()


@pytest.fixture
def filled() -> Callable[..., None]:
    """``filled(url, sessions=3, turns=3)`` writes a log to ``url``."""
    return fill_log
