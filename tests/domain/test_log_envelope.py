"""The fields the log adds to events are declared on every event class."""

from __future__ import annotations

import dataclasses

import pytest

from turnlog.domain.chain import GENESIS, ChainHead
from turnlog.domain.events import LogEnvelope, TurnlogCreated, TurnlogEvent
from turnlog.domain.session import Session
from turnlog.store.chaining import stamp


def event_classes() -> list[type]:
    found: list[type] = []
    pending: list[type] = [TurnlogEvent, TurnlogCreated]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", event_classes(), ids=lambda cls: cls.__name__)
def test_every_event_class_declares_its_place_in_the_chain(cls: type) -> None:
    fields = {field.name: field for field in dataclasses.fields(cls)}
    assert issubclass(cls, LogEnvelope)
    assert fields["session_seq"].kw_only
    assert fields["chain"].kw_only


def test_stamping_builds_new_events_and_leaves_the_decided_ones_alone() -> None:
    session = Session.create(
        "s1", agent_name="a", agent_digest="d", shared_state={}, model_route="default"
    )
    session.update_shared_state({"k": 1})
    decided = session.collect_events()
    stamped, head = stamp(decided, ChainHead())
    assert [event.session_seq for event in stamped] == [1, 2]
    assert head == ChainHead(2, stamped[-1].chain)
    assert stamped[0].chain != GENESIS
    assert all(event.session_seq == 0 and event.chain == "" for event in decided)
    # Chained from where the head was: the same events after another head
    # get other links.
    again, _ = stamp(decided, head)
    assert [event.session_seq for event in again] == [3, 4]
    assert again[0].chain != stamped[0].chain
