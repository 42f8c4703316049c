"""Typed answers across processes and SIGKILL, on SQLite and PostgreSQL.

A typed answer recorded by one process is the same object when another
process reopens the session; a kill in the middle of a retry leaves the
rejected attempt recorded, the turn closed by the usual crash rules, and
the next turn typed as ever.
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from kill_support import kill_when  # scenarios/conftest puts this folder on sys.path

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.events import AnswerRejectedMsg, TurnAbortedMsg
from turnlog.store.verify import verify_session

pytestmark = pytest.mark.subprocess

CHILD = Path(__file__).with_name("typed_child.py")


class Forecast(pydantic.BaseModel):  # the child's type, declared again here
    city: str
    celsius: float


def kill_child_at(url: str, session_id: str, mode: str, marker: str) -> None:
    kill_when(CHILD, marker, url, session_id, mode)


def test_another_process_reopens_the_same_typed_answer(store_url: str) -> None:
    kill_child_at(store_url, "typed-elsewhere", "answered", "DONE")
    agent = Agent("forecaster", model=ScriptedModel([]), output_type=Forecast)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="typed-elsewhere")
        assert session.last_output() == Forecast(city="Oslo", celsius=-3.5)
        assert verify_session(rt.store, "typed-elsewhere").ok


def test_a_kill_mid_retry_keeps_the_rejection_and_the_next_turn_is_typed(
    store_url: str,
) -> None:
    kill_child_at(store_url, "typed-retry", "mid-retry", "RETRYING")
    model = ScriptedModel([Forecast(city="Bergen", celsius=7)])
    agent = Agent("forecaster", model=model, output_type=Forecast)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="typed-retry")
        messages = [e.msg for e in rt.replay_events("typed-retry")]
        (rejected,) = [m for m in messages if isinstance(m, AnswerRejectedMsg)]
        assert (rejected.attempt, rejected.final) == (1, False)
        assert rejected.reason == "answer.celsius: Field required"
        assert isinstance(messages[-1], TurnAbortedMsg)  # closed as a crash
        assert session.last_output() is None  # no answer was ever accepted
        result = session.prompt("and Bergen?", timeout=20)
        assert result.output == Forecast(city="Bergen", celsius=7)
        assert session.last_output() == result.output
        assert verify_session(rt.store, "typed-retry").ok
