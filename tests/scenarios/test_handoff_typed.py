"""A handoff to an agent with an ``output_type``: the session answers in
the type of the agent in charge, asked for natively and validated."""

from __future__ import annotations

import pydantic

from turnlog import Agent, Runtime, ScriptedModel, calls, tool_call


class Refund(pydantic.BaseModel):
    invoice: str
    amount: float


def agents(model: ScriptedModel) -> Agent:
    refunds = Agent(
        "refunds",
        model=model,
        instructions="You answer with a refund.",
        output_type=Refund,
    )
    return Agent("triage", model=model, handoffs=[refunds])


def test_the_agent_put_in_charge_answers_in_its_own_type(store_url: str) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("transfer_to_refunds", {"reason": "a refund"})),
            {"invoice": "7", "amount": 40.0},
        ]
    )
    triage = agents(model)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(triage, session_id="typed-handoff")
        result = session.prompt("Refund invoice 7.", timeout=10)
        assert result.status == "completed"
        assert result.output == Refund(invoice="7", amount=40.0)
        first, second = model.requests
        assert first.output_schema is None  # triage answers in text
        assert second.output_schema is not None  # refunds is asked for JSON
        assert "amount" in str(second.output_schema.schema)
        assert session.last_output() == Refund(invoice="7", amount=40.0)


def test_a_reopened_session_rebuilds_the_answer_of_the_agent_in_charge(
    store_url: str,
) -> None:
    model = ScriptedModel(
        [
            calls(tool_call("transfer_to_refunds", {})),
            {"invoice": "9", "amount": 12.5},
        ]
    )
    with Runtime.open(store_url) as rt:
        rt.create_session(agents(model), session_id="typed-handoff-2").prompt(
            "Refund invoice 9.", timeout=10
        )
    with Runtime.open(store_url) as rt:
        again = rt.create_session(
            agents(ScriptedModel([])), session_id="typed-handoff-2"
        )
        assert again.last_output() == Refund(invoice="9", amount=12.5)
