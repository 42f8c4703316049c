"""Instructions as a function of the run: evaluated per model step, recorded.

An audit shows the instructions each step was sent; static instructions
record nothing more than before.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from turnlog import (
    Agent,
    RunContext,
    Runtime,
    ScriptedModel,
    ToolContext,
    calls,
    function_tool,
    tool_call,
)
from turnlog.cli import main


@dataclass
class Shop:
    name: str


@pytest.fixture
def rt(store_url: str) -> Iterator[Runtime]:
    runtime = Runtime.open(store_url)
    yield runtime
    runtime.close()


def recorded(rt: Runtime, session_id: str, name: str) -> list[object]:
    return [
        rt.store.decode(n)
        for n in rt.store.notifications(1, 100_000)
        if n.topic == f"turnlog:{name}" and rt.store.decode(n).session_id == session_id
    ]


def where_we_are(context: RunContext[Shop]) -> str:
    return (
        f"You serve {context.deps.name} for {context.agent_name}; "
        f"stage {context.shared_state['stage']}."
    )


@function_tool
def advance(context: ToolContext[Shop]) -> str:
    """Moves to the next stage."""
    context.update_shared_state(stage=context.shared_state["stage"] + 1)
    return "advanced"


def test_instructions_are_evaluated_per_step_and_recorded(
    rt: Runtime, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ScriptedModel([calls(tool_call("advance")), "done"])
    agent = Agent(
        "seller",
        model=model,
        instructions=where_we_are,
        tools=[advance],
        deps_type=Shop,
    )
    session = rt.create_session(
        agent, session_id="s", shared_state={"stage": 1}, deps=Shop("corner")
    )
    assert session.prompt("sell").status == "completed"
    sent = [request.instructions for request in model.requests]
    assert sent == [
        "You serve corner for seller; stage 1.",
        "You serve corner for seller; stage 2.",
    ]
    evaluated = recorded(rt, "s", "InstructionsEvaluated")
    assert [(e.step, e.instructions) for e in evaluated] == list(  # type: ignore[attr-defined]
        zip([1, 2], sent, strict=True)
    )
    assert main(["--store", store_url, "audit", "s"]) == 0
    out = capsys.readouterr().out
    shown = re.findall(r"InstructionsEvaluated\s+(.*)$", out, re.MULTILINE)
    assert shown == [
        'step 1 sent with instructions "You serve corner for seller; stage 1."',
        'step 2 sent with instructions "You serve corner for seller; stage 2."',
    ]


def test_async_instructions_see_the_prompts_deps(rt: Runtime) -> None:
    async def greeting(context: RunContext[Shop]) -> str:
        return f"Greet for {context.deps.name}, turn {context.turn_id}."

    model = ScriptedModel(["hi", "hello"])
    session = rt.create_session(
        Agent("a", model=model, instructions=greeting),
        session_id="s",
        deps=Shop("session"),
    )
    first = session.prompt("one", deps=Shop("prompt"))
    session.prompt("two")
    assert [r.instructions for r in model.requests] == [
        f"Greet for prompt, turn {first.turn_ids[0]}.",
        f"Greet for session, turn {session.latest_run().turn_ids[0]}.",  # type: ignore[union-attr]
    ]


def test_a_failing_instructions_function_fails_the_turn_clearly(
    rt: Runtime,
) -> None:
    def broken(context: RunContext[None]) -> str:
        msg = "no catalogue"
        raise LookupError(msg)

    model = ScriptedModel(["never"])
    session = rt.create_session(
        Agent("a", model=model, instructions=broken), session_id="s"
    )
    result = session.prompt("hi")
    assert result.status == "failed"
    assert result.error is not None
    assert "broken failed: LookupError: no catalogue" in result.error
    assert model.requests == []
    [aborted] = recorded(rt, "s", "TurnAborted")
    assert "broken failed: LookupError: no catalogue" in aborted.reason  # type: ignore[attr-defined]
    assert aborted.failed  # type: ignore[attr-defined]
    assert recorded(rt, "s", "ModelStepStarted") == []


def test_instructions_that_are_not_text_fail_the_turn(rt: Runtime) -> None:
    session = rt.create_session(
        Agent("a", model=ScriptedModel(["never"]), instructions=lambda _: 42),
        session_id="s",
    )
    result = session.prompt("hi")
    assert result.status == "failed"
    assert "gave int, not a str" in (result.error or "")


def test_static_instructions_record_nothing_more(rt: Runtime) -> None:
    model = ScriptedModel([calls(tool_call("advance")), "done"])
    session = rt.create_session(
        Agent("a", model=model, instructions="Be brief.", tools=[advance]),
        session_id="s",
        shared_state={"stage": 1},
    )
    session.prompt("go")
    assert [r.instructions for r in model.requests] == ["Be brief.", "Be brief."]
    assert recorded(rt, "s", "InstructionsEvaluated") == []


def test_the_digest_names_the_instructions_function() -> None:
    model = ScriptedModel(["x"])

    def other(context: RunContext[None]) -> str:
        return "other"

    dynamic = Agent("a", model=model, instructions=where_we_are)
    assert dynamic.instructions == ""
    assert dynamic.instructions_function is where_we_are
    assert dynamic.clone().digest() == dynamic.digest()
    assert Agent("a", model=model, instructions=other).digest() != dynamic.digest()
    assert Agent("a", model=model).digest() != dynamic.digest()
