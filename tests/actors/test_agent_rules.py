"""actors.agent_rules: an agent's TurnRules, built once and shared."""

from __future__ import annotations

import gc
import weakref

from turnlog import Agent, ScriptedModel, function_tool
from turnlog.actors.agent_rules import agent_rules, session_rules


def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def risky(a: int) -> int:
    """Needs a decision."""
    return a


def agent() -> Agent:
    tools = [
        function_tool(add, name="add", description="Adds."),
        function_tool(risky, name="risky", description="Risky.", needs_approval=True),
    ]
    return Agent("a", model=ScriptedModel(["hi"]), tools=tools)


def test_one_agent_and_policy_give_the_same_rules() -> None:
    a = agent()
    assert agent_rules(a, "ask") is agent_rules(a, "ask")
    assert agent_rules(a, "allow") is not agent_rules(a, "ask")
    assert agent_rules(agent(), "ask") is not agent_rules(a, "ask")


def test_a_sessions_rules_are_the_shared_ones_with_its_id() -> None:
    a = agent()
    one, two = session_rules(a, "ask", "one"), session_rules(a, "ask", "two")
    assert (one.session_id, two.session_id) == ("one", "two")
    assert one.needs_approval is two.needs_approval
    assert agent_rules(a, "ask").session_id == ""


def test_the_policy_decides_which_calls_wait() -> None:
    a = agent()
    ask, allow = agent_rules(a, "ask"), agent_rules(a, "allow")
    assert ask.needs_approval("risky", "{}")
    assert not ask.needs_approval("add", "{}")
    assert not allow.needs_approval("risky", "{}")
    assert ask.tool_identity("add") == ("function", "")
    assert ask.tool_identity("nothing") == ("", "")
    assert ask.child_agent("add") == ""
    assert ask.model_identity("no such route") == ("", "")


def _shared_rules_of_an_agent_its_tool_refers_to() -> weakref.ref[Agent]:
    kept: list[Agent] = []

    def backwards() -> str:
        """Refers to the agent."""
        return kept[0].name

    a = Agent(
        "a",
        model=ScriptedModel(["hi"]),
        tools=[function_tool(backwards, name="backwards", description="Back.")],
    )
    kept.append(a)
    agent_rules(a, "ask")
    return weakref.ref(a)


def test_the_shared_rules_do_not_keep_their_agent() -> None:
    # Its tools may refer to it (a tool closing over a session of it): the
    # rules, kept while the agent lives, must not hold it through them.
    gone = _shared_rules_of_an_agent_its_tool_refers_to()
    gc.collect()
    assert gone() is None
