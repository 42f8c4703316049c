"""``turnlog demo --agents``: an agent that asks another, and answers typed.

A scripted "planner" (offline, no API key) delegates the date question to
the plain demo's agent, used as a tool (``Agent.as_tool``): that call runs
a child session of its own in the log, which calls its ``add_days`` tool.
The planner then answers with a typed object (``output_type``), validated
and recorded as JSON. The audit of the planner's session shows the child
under the call that ran it.
"""

from __future__ import annotations

import re
import uuid

import pydantic

from turnlog.agent import Agent
from turnlog.cli.demo import (
    QUESTION,
    check_can_continue,
    demo_agent,
    describe_msg,
    prompt_printed,
)
from turnlog.domain.model import ModelRequest, ModelResponse
from turnlog.domain.run import RunResult
from turnlog.runtime import Runtime
from turnlog.scripted import ScriptedModel, calls, reply, tool_call

PLANNER_NAME = "planner"
"""The agents demo's agent; ``--session`` continues only its sessions."""

HELPER_TOOL = "ask_date_helper"
"""The name the planner calls the date helper by."""


class DateAnswer(pydantic.BaseModel):
    """The planner's typed answer."""

    date: str
    """The date asked for, YYYY-MM-DD."""
    weekday: str
    """Its day of the week."""
    answered_by: str
    """The agent whose answer it checked."""


def _typed_answer(request: ModelRequest) -> ModelResponse:
    # Reads the helper's answer from the request, as a real model would.
    output = next(
        item["output"]
        for item in reversed(request.items)
        if item.get("type") == "function_call_output"
    )
    found = re.search(r"(\d{4}-\d{2}-\d{2}) \((\w+)\)", output)
    date, weekday = found.groups() if found else ("unknown", "unknown")
    answer = DateAnswer(date=date, weekday=weekday, answered_by=demo_agent().name)
    return reply(
        answer.model_dump_json(),
        usage={"input_tokens": 90, "output_tokens": 24, "total_tokens": 114},
    )


def planner_agent() -> Agent:
    """The planner: asks the date helper (a child session), answers typed."""
    model = ScriptedModel(
        [
            calls(
                tool_call(
                    HELPER_TOOL,
                    {"input": QUESTION},
                    call_id=f"call_{uuid.uuid4().hex[:12]}",
                ),
                text="I will ask the date helper.",
                usage={"input_tokens": 52, "output_tokens": 18, "total_tokens": 70},
            ),
            _typed_answer,
        ]
    )
    helper = demo_agent().as_tool(
        name=HELPER_TOOL, description="Asks the date helper a date question."
    )
    return Agent(
        PLANNER_NAME,
        model=model,
        tools=[helper],
        output_type=DateAnswer,
        instructions="Delegate date arithmetic to the date helper; answer as JSON.",
    )


def run_agents_demo(runtime: Runtime, session_id: str) -> RunResult:
    """Runs the planner in ``session_id``, printing its conversation, then
    its child session's, and the typed answer."""
    check_can_continue(runtime, session_id, PLANNER_NAME)
    session = runtime.create_session(planner_agent(), session_id=session_id)
    intro = (
        "turnlog demo --agents: a scripted planner (offline, no API key) asks "
        "the date helper, a child session of its own, and answers typed.\n"
    )
    result = prompt_printed(session, QUESTION, intro)
    for child in runtime.children(session_id):
        print(f"\n  child session {child.session_id} (agent {child.agent}):")
        for event in runtime.replay_events(child.session_id):
            line = describe_msg(event.msg)
            if line is not None:
                print(f"  {line}", flush=True)
    if result.completed:
        print(f"\ntyped answer: {result.output!r}")
    return result
