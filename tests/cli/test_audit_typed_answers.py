"""``turnlog audit``: refused and accepted answers are in the timeline, and
``--verify`` holds for a session that has them."""

from __future__ import annotations

import pydantic
import pytest
from cli_support import audit_lines, run

from turnlog import Agent, Runtime, ScriptedModel


class Forecast(pydantic.BaseModel):
    city: str
    celsius: float


def test_audit_shows_each_attempt_at_a_typed_answer(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    model = ScriptedModel(['{"city": "Oslo"}', Forecast(city="Oslo", celsius=-3)])
    agent = Agent("forecaster", model=model, output_type=Forecast)
    with Runtime.open(store) as rt:
        rt.create_session(agent, session_id="typed").prompt("weather?", timeout=20)

    code, out, err = run(capsys, "--store", store, "audit", "typed", "--verify")
    assert (code, out, err) == (0, "typed: ok, 13 events checked\n", "")

    code, out, err = run(capsys, "--store", store, "audit", "typed")
    assert (code, err) == (0, ""), err
    lines = audit_lines(out)
    summaries = [(name, summary) for _, _, name, summary in lines]
    assert (
        "AnswerRejected",
        "answer 1 rejected by output_type, sent back: answer.celsius: Field required",
    ) in summaries
    assert (
        "AnswerAccepted",
        'answer accepted: {"city": "Oslo", "celsius": -3.0}',
    ) in summaries
    names = [name for name, _ in summaries]
    assert names.index("AnswerRejected") < names.index("AnswerAccepted")
    assert names.index("AnswerAccepted") < names.index("TurnCompleted")
