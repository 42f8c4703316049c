"""A checkpoint's last usage is the last model call's, as UsageRecordedMsg.last is."""

from __future__ import annotations

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.domain import protocol as p

REPORTED = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}


@function_tool
def ping() -> str:
    """Answers pong."""
    return "pong"


def test_last_usage_is_none_when_the_last_call_reported_none(rt: Runtime) -> None:
    # The first step reports usage, the second (the answer) reports none.
    model = ScriptedModel(
        [calls(tool_call("ping"), usage=REPORTED), "done"], usage=None
    )
    session = rt.create_session(Agent("a", model=model, tools=[ping]), session_id="u")
    session.prompt("go", timeout=30)
    counts = [
        event.msg
        for event in rt.replay_events("u")
        if isinstance(event.msg, p.UsageRecordedMsg)
    ]
    assert [count.last for count in counts] == [REPORTED, None]
    checkpoint = rt.checkpoints.load("u")
    assert checkpoint.last_usage is None
    assert checkpoint.last_usage == counts[-1].last
    assert checkpoint.total_usage == REPORTED
