"""The machine finds a fact's handler by its class, and records the
transitions it takes only when asked to (tests ask; actors do not)."""

from __future__ import annotations

import typing

from tests.domain.turn_machine_support import PROMPT, Harness, answer
from turnlog.domain.turn_facts import Fact
from turnlog.domain.turn_machine import _HANDLERS, TurnMachine


def test_every_fact_class_has_its_handler() -> None:
    assert set(_HANDLERS) == set(typing.get_args(Fact))


def test_a_machine_records_transitions_only_when_made_to() -> None:
    recording = Harness()
    recording.take(PROMPT)
    recording.take(answer("done"))
    assert recording.machine.taken == {
        ("Idle", "TurnInput", "ModelCall"),
        ("ModelCall", "StepSucceeded", "Idle"),
    }
    quiet = Harness()
    rules = quiet.machine._course.rules
    quiet.machine = TurnMachine(rules, quiet.held)
    quiet.take(PROMPT)
    events, _ = quiet.take(answer("done"))
    assert "TurnCompleted" in events  # the turn went its way all the same
    assert quiet.machine.taken == set()
