"""A subscriber that falls behind: the oldest events go, the ends never do."""

from __future__ import annotations

import pytest

from turnlog import (
    Agent,
    EventsMissed,
    RunConfig,
    RunEvent,
    RunFinished,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.events import TurnCompletedMsg


@function_tool
def ping() -> str:
    """Answers pong."""
    return "pong"


def chatty_agent() -> Agent:
    """Two runs of a tool call and an answer: many more events than a buffer."""
    steps = [calls(tool_call("ping")), calls(tool_call("ping")), "first done"]
    steps += [calls(tool_call("ping")), "second done"]
    return Agent("a", model=ScriptedModel(steps), tools=[ping])


def read_all(subscription) -> list:
    """Every item buffered, read one by one as a reader would."""
    items = []
    while True:
        try:
            items.append(subscription.get(timeout=0))
        except TimeoutError:
            return items


def test_a_reader_that_read_nothing_meets_the_gap_then_the_end(rt: Runtime) -> None:
    session = rt.create_session(chatty_agent(), session_id="behind")
    everything = session.subscribe()
    tiny = session.subscribe(buffer=2)
    result = session.prompt("go", timeout=30)  # returns after RunFinished is out
    offered = read_all(everything)
    assert len(offered) > 10
    got = read_all(tiny)
    # Nothing came after the run ended, yet the reader is told at the gap.
    assert got[0] == EventsMissed("behind", len(offered) - 2)
    assert got[1:] == offered[-2:]
    assert got[-1] == RunFinished("behind", "completed", result)
    assert got[-2].event.msg == TurnCompletedMsg(result.turn_ids[-1], "first done")


def test_terminal_events_outlive_a_full_buffer_across_runs(rt: Runtime) -> None:
    session = rt.create_session(chatty_agent(), session_id="runs")
    tiny = session.subscribe(buffer=1)
    first = session.prompt("go", timeout=30)
    second = session.prompt("again", timeout=30)
    got = read_all(tiny)
    finished = [item for item in got if isinstance(item, RunFinished)]
    assert [f.result for f in finished] == [first, second]
    # Each gap is reported where it was: before each turn's last events.
    kinds = [
        type(item.event.msg).__name__ if isinstance(item, RunEvent) else type(item)
        for item in got
    ]
    assert kinds == [
        EventsMissed,
        "TurnCompletedMsg",
        RunFinished,
        EventsMissed,
        "TurnCompletedMsg",
        RunFinished,
    ]
    assert sum(i.count for i in got if isinstance(i, EventsMissed)) > 10


def test_the_protocol_face_keeps_each_turns_end(rt: Runtime) -> None:
    tiny = RunConfig(event_buffer=1)
    handle = rt.create_agent(chatty_agent(), session_id="proto", run_config=tiny)
    result = handle.session.prompt("go", timeout=30)
    event = handle.next_event(timeout=0)  # the gap marker is skipped here
    assert event.msg == TurnCompletedMsg(result.turn_ids[-1], "first done")
    with pytest.raises(TimeoutError):
        handle.next_event(timeout=0)
    handle.close()
