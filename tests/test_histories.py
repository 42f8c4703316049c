"""Golden histories: logs recorded by earlier turnlogs must keep replaying.

Each history in tests/histories/ is one session's raw stored events, the
EventMsg stream its replay gave, and its checkpoint, recorded by
scripts/record_histories.py. Loaded into a fresh store, every later
turnlog must verify its hash chain and replay it to the same stream and
checkpoint. A change to an event's schema needs an upcaster
(``class_version`` and ``upcast_vN_vN+1`` on the event class), never an
edited history.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent

from turnlog import Agent, ModelRouter, Runtime, ScriptedModel, UsageError
from turnlog.domain.protocol import encode_json
from turnlog.store.verify import verify_session

HISTORIES = Path(__file__).parent / "histories"
NAMES = sorted(
    p.name.removesuffix(".events.jsonl") for p in HISTORIES.glob("*.events.jsonl")
)


class Line(msgspec.Struct):
    position: int
    originator_id: str
    originator_version: int
    topic: str
    state: msgspec.Raw


def load(rt: Runtime, name: str) -> None:
    lines = [
        msgspec.json.decode(raw, type=Line)
        for raw in (HISTORIES / f"{name}.events.jsonl").read_bytes().splitlines()
    ]
    recorder = rt.store._app.recorder
    for line in lines:  # one by one, so positions are as recorded
        recorder.insert_events(
            [
                StoredEvent(
                    originator_id=uuid.UUID(line.originator_id),
                    originator_version=line.originator_version,
                    topic=line.topic,
                    state=bytes(line.state),
                )
            ]
        )
    assert rt.store.max_position() == lines[-1].position


def test_there_are_histories() -> None:
    assert {"approvals", "basic", "hooks", "interrupted"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_recorded_history_still_verifies_and_replays_the_same(name: str) -> None:
    with Runtime.open("memory://") as rt:
        load(rt, name)
        assert verify_session(rt.store, name).ok
        replay = [encode_json(e).decode() for e in rt.replay_events(name)]
        expected = (HISTORIES / f"{name}.replay.jsonl").read_text().splitlines()
        assert replay == expected
        checkpoint = msgspec.json.decode(msgspec.json.encode(rt.checkpoints.load(name)))
        golden = msgspec.json.decode(
            (HISTORIES / f"{name}.checkpoint.json").read_bytes()
        )
        assert checkpoint == golden


@pytest.mark.parametrize("name", NAMES)
def test_a_recorded_session_opens_and_takes_another_turn(name: str) -> None:
    with Runtime.open("memory://") as rt:
        load(rt, name)
        model = ScriptedModel(["still here"])
        routes = ModelRouter("default", model).register("main", model)
        routes.register("backup", model)
        session = rt.create_session(Agent("historian", model=routes), session_id=name)
        before = len(session.messages())
        assert session.prompt("are you there?", timeout=10).final_output == "still here"
        assert len(session.messages()) == before + 2
        assert verify_session(rt.store, name).ok


def test_a_session_on_a_route_the_agent_lacks_is_refused_when_opened() -> None:
    with Runtime.open("memory://") as rt:
        load(rt, "basic")
        position = rt.store.max_position()
        agent = Agent("historian", model=ScriptedModel())
        with pytest.raises(UsageError, match="no model route 'backup'"):
            rt.create_session(agent, session_id="basic")
        assert rt.store.max_position() == position
