"""Handoffs: the model hands the conversation to another agent, durably.

Through the public API on both stores: the handoff is answered and
recorded, the same turn's next step is the new agent's (its instructions,
tools and route, as the model is asked), handing back works, a reopened
session goes on with the agent in charge, and graphs that cannot work are
refused before anything is written.
"""

from __future__ import annotations

import pytest

from turnlog import (
    Agent,
    InvalidInputError,
    ModelRouter,
    RunConfig,
    Runtime,
    ScriptedModel,
    UsageError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.traces import session_spans


@function_tool
def lookup_invoice(number: str) -> str:
    """Looks an invoice up."""
    return f"invoice {number}: 40 EUR, paid"


@function_tool
def greet() -> str:
    """Says hello."""
    return "hello"


def tool_names(request) -> list[str]:
    return [tool.name for tool in request.tools]


def triage_and_billing(model: ScriptedModel) -> tuple[Agent, Agent]:
    """Triage hands off to billing, which hands back to triage by name."""
    billing = Agent(
        "billing",
        model=model,
        instructions="You handle invoices.",
        tools=[lookup_invoice],
        handoffs=["triage"],
        handoff_description="Questions about invoices and payments.",
    )
    triage = Agent(
        "triage",
        model=model,
        instructions="You route questions.",
        tools=[greet],
        handoffs=[billing],
    )
    return triage, billing


def test_a_handoff_mid_turn_continues_with_the_new_agent(store_url: str) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("transfer_to_billing", {"reason": "an invoice"})),
            calls(tool_call("lookup_invoice", {"number": "7"})),
            "Invoice 7 is paid.",
        ]
    )
    triage, _ = triage_and_billing(model)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(triage, session_id="h1")
        result = session.prompt("Is invoice 7 paid?", timeout=10)
        assert result.status == "completed"
        assert result.final_output == "Invoice 7 is paid."
        first, second, third = model.requests
        assert first.instructions == "You route questions."
        assert tool_names(first) == ["greet", "transfer_to_billing"]
        assert second.instructions == "You handle invoices."
        assert tool_names(second) == ["lookup_invoice", "transfer_to_triage"]
        assert second.turn_id == first.turn_id  # the same turn goes on
        # The new agent sees the whole conversation, the handoff answered.
        outputs = [i for i in second.items if i["type"] == "function_call_output"]
        assert outputs[-1]["output"] == '{"assistant":"billing"}'
        assert second.items[0]["content"] == "Is invoice 7 paid?"
        assert third.instructions == "You handle invoices."
        handed = [
            e.msg
            for e in rt.replay_events("h1")
            if isinstance(e.msg, p.AgentHandedOffMsg)
        ]
        assert handed == [
            p.AgentHandedOffMsg("triage", "billing", handed[0].call_id, "an invoice")
        ]
        checkpoint = rt.checkpoints.load("h1")
        assert checkpoint is not None
        assert checkpoint.agent_in_charge == "billing"
        assert checkpoint.agent_name == "triage"
        # The trace shows it as an event of the turn's span.
        (turn,) = [x for x in session_spans(rt, "h1") if x.name.startswith("invoke")]
        (handoff,) = [e for e in turn.events if e.name == "turnlog.handoff"]
        assert handoff.attributes["turnlog.handoff.to"] == "billing"
        assert handoff.attributes["turnlog.handoff.reason"] == "an invoice"


def test_handing_back_and_a_new_turn_stay_with_the_agent_in_charge(
    store_url: str,
) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("transfer_to_billing")),
            "billing here",
            "still billing",  # the next turn: billing is in charge
            calls(tool_call("transfer_to_triage", {"reason": "not billing"})),
            "triage again",
        ]
    )
    triage, _ = triage_and_billing(model)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(triage, session_id="h2")
        assert session.prompt("invoice?", timeout=10).final_output == "billing here"
        assert session.prompt("more", timeout=10).final_output == "still billing"
        assert session.prompt("hm", timeout=10).final_output == "triage again"
        instructions = [r.instructions for r in model.requests]
        assert instructions == [
            "You route questions.",
            "You handle invoices.",
            "You handle invoices.",
            "You handle invoices.",
            "You route questions.",
        ]
        checkpoint = rt.checkpoints.load("h2")
        assert checkpoint is not None
        assert checkpoint.agent_in_charge == "triage"


def test_a_reopened_session_continues_with_the_agent_in_charge(store_url: str) -> None:
    model = ScriptedModel([calls(tool_call("transfer_to_billing")), "billing here"])
    triage, _ = triage_and_billing(model)
    with Runtime.open(store_url) as rt:
        rt.create_session(triage, session_id="h3").prompt("invoice?", timeout=10)
    later = ScriptedModel(["billing, after a restart"])
    triage, _ = triage_and_billing(later)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(triage, session_id="h3")
        result = session.prompt("and now?", timeout=10)
        assert result.final_output == "billing, after a restart"
        (request,) = later.requests
        assert request.instructions == "You handle invoices."
        assert "lookup_invoice" in tool_names(request)
        assert session.messages()[0].content == "invoice?"


def test_reopening_with_a_graph_that_lacks_the_agent_in_charge_is_refused(
    store_url: str,
) -> None:
    model = ScriptedModel([calls(tool_call("transfer_to_billing")), "billing here"])
    triage, _ = triage_and_billing(model)
    with Runtime.open(store_url) as rt:
        rt.create_session(triage, session_id="h4").prompt("invoice?", timeout=10)
    with Runtime.open(store_url) as rt:
        alone = Agent("triage", model=ScriptedModel([]))
        with pytest.raises(UsageError, match="handed off to agent 'billing'"):
            rt.create_session(alone, session_id="h4")
        # Nothing changed, and the lease went back: the right graph opens it.
        triage, _ = triage_and_billing(ScriptedModel(["ok"]))
        session = rt.create_session(triage, session_id="h4")
        assert session.prompt("again", timeout=10).final_output == "ok"


def test_a_handoff_beside_other_calls_waits_for_them_and_the_second_loses(
    store_url: str,
) -> None:
    other = Agent("other", model=ScriptedModel([]), instructions="other")
    model = ScriptedModel(
        [
            calls(
                tool_call("greet", call_id="c1"),
                tool_call("transfer_to_billing", call_id="c2"),
                tool_call("transfer_to_other", call_id="c3"),
            ),
            "billing answers",
        ]
    )
    billing = Agent("billing", model=model, instructions="billing")
    triage = Agent("triage", model=model, tools=[greet], handoffs=[billing, other])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(triage, session_id="h5")
        assert session.prompt("hi", timeout=10).final_output == "billing answers"
        second = model.requests[1]
        assert second.instructions == "billing"
        outputs = {
            i["call_id"]: i["output"]
            for i in second.items
            if i["type"] == "function_call_output"
        }
        assert outputs["c1"] == "hello"  # the triage agent's tool ran
        assert outputs["c2"] == '{"assistant":"billing"}'
        assert outputs["c3"].startswith("not handed off")
        handed = [
            e.msg.to_agent
            for e in rt.replay_events("h5")
            if isinstance(e.msg, p.AgentHandedOffMsg)
        ]
        assert handed == ["billing"]


def test_the_new_agent_runs_on_its_own_route() -> None:
    cheap = ScriptedModel([calls(tool_call("transfer_to_expert"))])
    strong = ScriptedModel(["expert answer"])
    router = ModelRouter("cheap", cheap).register("strong", strong)
    expert = Agent("expert", model=router, model_route="strong")
    triage = Agent("triage", model=router, handoffs=[expert])
    with Runtime.open("memory://") as rt:
        session = rt.create_session(triage, session_id="h6")
        assert session.prompt("hard one", timeout=10).final_output == "expert answer"
        assert [r.route for r in strong.requests] == ["strong"]
        checkpoint = rt.checkpoints.load("h6")
        assert checkpoint is not None
        assert checkpoint.model_route == "strong"


def test_graphs_that_cannot_work_are_refused(tmp_path) -> None:
    model = ScriptedModel([])
    with pytest.raises(InvalidInputError, match="cannot hand off to itself"):
        Agent("a", model=model, handoffs=["a"])
    with pytest.raises(InvalidInputError, match="both would be the tool"):
        Agent(
            "a",
            model=model,
            handoffs=[Agent("Billing desk", model=model), "billing_desk"],
        )

    @function_tool
    def transfer_to_b() -> str:
        """A tool in the way."""
        return ""

    with pytest.raises(InvalidInputError, match="rename the tool"):
        Agent("a", model=model, tools=[transfer_to_b], handoffs=["b"])
    with pytest.raises(InvalidInputError, match="Agent objects or agent names"):
        Agent("a", model=model, handoffs=[42])
    # A target whose route its router lacks is refused as it is made.
    with pytest.raises(UsageError, match="no model route 'missing'"):
        Agent("b", model=ModelRouter("default", model), model_route="missing")
    url = f"sqlite:///{tmp_path}/refused.sqlite3"
    with Runtime.open(url) as rt:
        unknown = Agent("a", model=model, handoffs=["nobody"])
        with pytest.raises(InvalidInputError, match="no agent reachable"):
            rt.create_session(unknown, session_id="r1")
        twins = Agent(
            "a",
            model=model,
            handoffs=[
                Agent("b", model=model, handoffs=[Agent("c", model=model)]),
                Agent("c", model=model),
            ],
        )
        with pytest.raises(InvalidInputError, match="two agents are named 'c'"):
            rt.create_session(twins, session_id="r2")
        assert rt.sessions() == []


def test_a_passivated_session_revives_with_the_agent_in_charge(store_url: str) -> None:
    model = ScriptedModel(
        [calls(tool_call("transfer_to_billing")), "billing here", "billing, revived"]
    )
    triage, _ = triage_and_billing(model)
    with Runtime.open(store_url, run_config=RunConfig(idle_timeout=0.2)) as rt:
        session = rt.create_session(triage, session_id="h7")
        assert session.prompt("invoice?", timeout=10).final_output == "billing here"
        assert session.wait_passivated(10)
        # The revived actor starts from the log: billing is in charge, and
        # its routes are the ones a route change is checked against.
        assert session.prompt("again", timeout=10).final_output == "billing, revived"
        assert model.requests[-1].instructions == "You handle invoices."
        with pytest.raises(UsageError, match="no model route 'elsewhere'"):
            session.set_model_route("elsewhere")
