"""Events triggered through trigger_session_event are the events __init__ makes.

trigger_session_event builds an event with a function made for its class
(domain.events._constructor) rather than the dataclass's ``__init__``: the
two must give equal events, with their fields in the same order (the
stored bytes follow it), and refuse the same bad input.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

import turnlog  # noqa: F401 - every event class, registered
from turnlog.domain.events import TurnlogCreated, TurnlogEvent, _constructor
from turnlog.domain.ids import turn_uuid
from turnlog.domain.turn import Turn
from turnlog.domain.turn_events import ModelStepStarted, TurnOpened


def event_classes() -> list[type]:
    found: list[type] = []
    pending: list[type] = [TurnlogEvent, TurnlogCreated]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def arguments(cls: type) -> dict[str, Any]:
    """A value for every field of ``cls``, distinct from its default."""
    values: dict[str, Any] = {}
    for number, field in enumerate(dataclasses.fields(cls)):
        values[field.name] = f"value {number}"
    values["originator_id"] = uuid.uuid4()
    values["originator_version"] = 3
    values["timestamp"] = datetime(2026, 1, 1, tzinfo=UTC)
    return values


@pytest.mark.parametrize("cls", event_classes(), ids=lambda cls: cls.__name__)
def test_the_made_constructor_makes_what_init_makes(cls: type) -> None:
    given = arguments(cls)
    made, built = _constructor(cls)(**given), cls(**given)
    assert made == built
    assert type(made) is cls
    assert list(vars(made).items()) == list(vars(built).items())
    # With every default left out, the defaults are the class's.
    required = {
        field.name: given[field.name]
        for field in dataclasses.fields(cls)
        if field.default is dataclasses.MISSING
    }
    made, built = _constructor(cls)(**required), cls(**required)
    assert list(vars(made).items()) == list(vars(built).items())


def test_bad_arguments_are_refused_as_init_refuses_them() -> None:
    given = arguments(ModelStepStarted)
    make = _constructor(ModelStepStarted)
    assert make is not ModelStepStarted  # the made one, not the class
    with pytest.raises(TypeError, match="non-UUID originator_id"):
        make(**{**given, "originator_id": "not a uuid"})
    with pytest.raises(TypeError):
        make(**given, unknown=1)
    del given["route"]
    with pytest.raises(TypeError):
        make(**given)


def test_a_triggered_event_is_the_aggregates_next_and_applied() -> None:
    turn = Turn.open("s1", 1, "sub")
    turn.start_step("default")
    opened, started = turn.collect_events()
    assert type(started) is ModelStepStarted
    assert started.originator_id == turn.id == opened.originator_id
    assert started.originator_version == turn.version == 2
    assert started.timestamp > opened.timestamp
    assert turn.modified_on == started.timestamp
    assert turn.step_open
    assert turn.steps == 1
    with pytest.raises(TypeError, match="Can't construct event"):
        turn.trigger_event(ModelStepStarted, step=2)
    assert turn.version == 2
    assert not turn.pending_events


def test_a_turn_opens_as_eventsourcings_create_opens_it() -> None:
    opened = Turn.open("s1", 4, "sub")
    created = Turn._create(
        TurnOpened,
        id=turn_uuid("s1", 4),
        session_id="s1",
        number=4,
        submission_id="sub",
    )
    (event,) = opened.collect_events()
    (expected,) = created.collect_events()
    same_but_time = {"timestamp"}
    assert {
        key: value for key, value in vars(event).items() if key not in same_but_time
    } == {
        key: value for key, value in vars(expected).items() if key not in same_but_time
    }
    assert list(vars(event)) == list(vars(expected))
    moments = {"_created_on", "_modified_on"}
    assert {k: v for k, v in vars(opened).items() if k not in moments} == {
        k: v for k, v in vars(created).items() if k not in moments
    }
    assert list(vars(opened)) == list(vars(created))
    assert opened.created_on == opened.modified_on == event.timestamp
