"""Typed answers across processes and SIGKILL, on SQLite and PostgreSQL.

A typed answer recorded by one process is the same object when another
process reopens the session; a kill in the middle of a retry leaves the
rejected attempt recorded, the turn closed by the usual crash rules, and
the next turn typed as ever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.events import AnswerRejectedMsg, TurnAbortedMsg
from turnlog.store.verify import verify_session

pytestmark = pytest.mark.subprocess

CHILD = Path(__file__).with_name("typed_child.py")


class Forecast(pydantic.BaseModel):  # the child's type, declared again here
    city: str
    celsius: float


def kill_child_at(url: str, session_id: str, mode: str, marker: str) -> None:
    with subprocess.Popen(
        [sys.executable, str(CHILD), url, session_id, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            for line in proc.stdout:
                if line.startswith(marker):
                    break
            else:
                pytest.fail(f"child exited early ({proc.wait()}): {proc.stderr.read()}")
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


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
