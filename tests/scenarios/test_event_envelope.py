"""What every delivered Event carries (issue 23, item 2): an id, the time
its fact was recorded, the session's trace and a schema version, the same
live, in a replay, after a restart and in another reader of the log."""

from __future__ import annotations

import json
from datetime import UTC

import msgspec
import pytest

from turnlog import (
    Agent,
    RunEvent,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)
from turnlog.cli.main import main
from turnlog.domain import protocol as p
from turnlog.testing import wait_for


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


def agent(*answers: object) -> Agent:
    """An agent that looks a key up, then answers (streamed in fragments)."""
    model = ScriptedModel(
        [calls(tool_call("lookup", {"key": "k"})), *answers], stream_chunk=4
    )
    return Agent("enveloped", model=model, tools=[lookup])


def live_run(session, text: str) -> list[p.Event]:
    """Every Event delivered live to a subscriber during one prompt."""
    events = session.subscribe()
    try:
        session.prompt(text, timeout=30)
        _, seen = wait_for(events, lambda m: isinstance(m, p.TurnCompletedMsg))
    finally:
        events.close()
    return [item.event for item in seen if isinstance(item, RunEvent)]


def durable(events: list[p.Event]) -> list[p.Event]:
    return [event for event in events if not event.transient]


def test_ids_are_unique_and_the_same_live_in_replay_and_after_a_restart(
    store_url: str,
) -> None:
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent("first answer"), session_id="a:b")
        live = live_run(session, "go")
        replayed = rt.replay_events("a:b")
    assert durable(live) == replayed[-len(durable(live)) :]
    ids = [event.event_id for event in replayed]
    assert None not in ids
    assert len(set(ids)) == len(ids)
    # The answering step yields two messages at one sequence: told apart by
    # their index, the id's last part (the session id's colons stay whole).
    answer = [e for e in replayed if isinstance(e.msg, p.AgentMessageMsg)][-1]
    step = replayed[replayed.index(answer) + 1]
    assert answer.sequence == step.sequence
    assert answer.event_id == f"a:b:{answer.sequence}:0"
    assert step.event_id == f"a:b:{answer.sequence}:1"
    for event in replayed:
        session_id, sequence, index = (event.event_id or "").rsplit(":", 2)
        assert (session_id, int(sequence)) == ("a:b", event.sequence)
        assert int(index) >= 0
    # Another runtime (a restart, or another process on the same log)
    # gives the same Events, and a revived session goes on with new ids.
    with Runtime.open(store_url) as rt:
        assert rt.replay_events("a:b") == replayed
        with rt.follow("a:b") as follower:
            followed = [follower.get(10) for _ in replayed]
        assert followed == replayed
        session = rt.create_session(agent("second answer"), session_id="a:b")
        second = live_run(session, "again")
        after_restart = rt.replay_events("a:b")
    assert after_restart[: len(replayed)] == replayed
    assert after_restart[len(replayed) :] == durable(second)
    all_ids = [event.event_id for event in after_restart]
    assert len(set(all_ids)) == len(all_ids)


def test_timestamps_are_when_each_fact_was_recorded(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent("answer"), session_id="s")
        live = live_run(session, "go")
        replayed = rt.replay_events("s")
        stored = {
            item.event().session_seq: item.event().timestamp
            for item in rt.transcript.all("s")
        }
    # Live and replay agree (Events compare whole, the timestamp included).
    assert durable(live) == replayed[-len(durable(live)) :]
    times = [event.timestamp for event in replayed]
    assert all(t is not None and t.utcoffset() == UTC.utcoffset(None) for t in times)
    assert times == sorted(times)  # never decreasing
    assert all(event.timestamp == stored[event.sequence] for event in replayed)
    # A streamed delta is not recorded: no id, but the time it was streamed.
    deltas = [event for event in live if event.transient]
    assert deltas
    assert all(e.event_id is None and e.timestamp is not None for e in deltas)


def traces_shown(capsys: pytest.CaptureFixture[str], url: str, session: str) -> set:
    """The trace ids ``turnlog traces SESSION`` prints for the session."""
    capsys.readouterr()
    assert main(["--store", url, "traces", session]) == 0
    document = json.loads(capsys.readouterr().out)
    return {
        span["traceId"]
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    }


def test_the_trace_id_is_the_one_turnlog_traces_shows(
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TURNLOG_STORE", raising=False)
    checker = Agent("checker", model=ScriptedModel(["checked"]))
    lead = Agent(
        "lead",
        model=ScriptedModel(
            [calls(tool_call("check", {"input": "x"}, call_id="c")), "done"]
        ),
        tools=[checker.as_tool(name="check")],
    )
    with Runtime.open(store_url) as rt:
        live = live_run(rt.create_session(lead, session_id="lead"), "go")
        replayed = rt.replay_events("lead")
        child = rt.replay_events("lead:1:c")  # the child session the call ran
    shown = traces_shown(capsys, store_url, "lead")
    assert len(shown) == 1
    assert {event.trace_id for event in live} == shown
    assert {event.trace_id for event in replayed} == shown
    # A child session's events are in its root's trace, as its spans are.
    assert child
    assert {event.trace_id for event in child} == shown
    assert traces_shown(capsys, store_url, "lead:1:c") == shown
    # A revived child (its translator resumed from the aggregate) keeps it.
    with Runtime.open(store_url) as rt:
        assert rt.replay_events("lead:1:c") == child


def test_every_event_carries_the_schema_version_in_its_json(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent("answer"), session_id="s")
        live = live_run(session, "go")
    assert p.EVENT_SCHEMA_VERSION == 1
    for event in live:
        assert event.schema_version == p.EVENT_SCHEMA_VERSION
        document = msgspec.json.decode(p.encode_json(event))
        assert document["schema_version"] == 1
        assert document["trace_id"] == event.trace_id
        assert document["event_id"] == event.event_id
        assert document["timestamp"] == p.encode_json(event.timestamp).decode()[1:-1]
        assert p.decode_event(p.encode_json(event)) == event


def test_json_of_an_event_made_before_the_envelope_still_decodes() -> None:
    # A line ``turnlog replay`` wrote before these fields existed.
    old = (
        b'{"session_id":"s","submission_id":null,"turn_id":null,"sequence":3,'
        b'"msg":{"type":"session_closed"}}'
    )
    event = p.decode_event(old)
    assert (event.event_id, event.timestamp, event.trace_id) == (None, None, "")
    assert event.schema_version == p.EVENT_SCHEMA_VERSION


def test_a_forks_events_have_ids_and_a_trace_of_its_own(
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TURNLOG_STORE", raising=False)
    with Runtime.open(store_url) as rt:
        source = rt.create_session(agent("first", "second"), session_id="src")
        source.prompt("one", timeout=30)
        fork = rt.fork_session("src", after_turn=1, session_id="fork")
        live = live_run(fork, "two")
        replayed = rt.replay_events("fork")
        source_events = rt.replay_events("src")
    # The fork's stream begins with the source's history, under the fork's
    # ids: unique with the fork's own events, which live and replay agree on.
    assert durable(live) == replayed[-len(durable(live)) :]
    ids = [event.event_id for event in replayed]
    assert len(set(ids)) == len(ids)
    assert all(i is not None and i.startswith("fork:") for i in ids)
    shared = replayed[: len(source_events)]
    assert [(e.sequence, e.timestamp) for e in shared] == [
        (e.sequence, e.timestamp) for e in source_events
    ]
    assert {event.trace_id for event in replayed} == traces_shown(
        capsys, store_url, "fork"
    )
    assert traces_shown(capsys, store_url, "fork") != traces_shown(
        capsys, store_url, "src"
    )
