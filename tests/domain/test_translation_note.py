"""``EventTranslator.note`` keeps what ``translate`` would, for nobody listening.

A session with no subscriber only notes its events; one that gains a
subscriber translates from then on. What it tells must be what a
translator that translated everything would have told: the same
envelopes, usage totals and answers. Held here over every recorded
history, with the subscriber arriving at every event.
"""

from __future__ import annotations

import pytest

from tests.test_histories import NAMES, load
from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.domain import translation
from turnlog.domain.chain import event_seq
from turnlog.domain.protocol import UsageRecordedMsg
from turnlog.domain.run import RunEvent


def _state(translator: translation.EventTranslator) -> dict[str, object]:
    return {
        key: (dict(value) if isinstance(value, dict) else value)
        for key, value in vars(translator).items()
        if key != "_timestamp"  # the event being translated: not state
    }


def _history_events(name: str) -> list[object]:
    with Runtime.open("memory://") as rt:
        load(rt, name)
        return [item.event() for item in rt.transcript.all(name)]


@pytest.mark.parametrize("name", NAMES)
def test_a_translator_that_noted_the_start_tells_the_rest_as_one_that_translated_all(
    name: str,
) -> None:
    events = _history_events(name)
    assert len(events) > 5
    told = translation.replay(name, events)
    for joined in range(len(events) + 1):
        translator = translation.EventTranslator(name)
        for event in events[:joined]:
            translator.note(event)
        rest = [
            out
            for event in events[joined:]
            for out in translator.translate(event, event_seq(event))
        ]
        tail = [out for out in told if out.sequence > event_seq(events[joined - 1])]
        assert rest == (tail if joined else told), f"joined after {joined} events"


@pytest.mark.parametrize("name", NAMES)
def test_only_the_noted_classes_change_a_translators_state(name: str) -> None:
    translator = translation.EventTranslator(name)
    for event in _history_events(name):
        before = _state(translator)
        translator.translate(event, event_seq(event))
        if not isinstance(event, translation._STATE_CASES):
            assert _state(translator) == before, type(event).__name__


def test_the_histories_hold_every_class_whose_translation_changes_state() -> None:
    seen = {type(event) for name in NAMES for event in _history_events(name)}
    missing = [cls.__name__ for cls in translation._STATE_CASES if cls not in seen]
    # An answer accepted is recorded only by a typed agent, and a context
    # rewritten only by a compaction or a hook: the live test below has both
    # kinds of state (usage and turns), so only these may be missing.
    assert set(missing) <= {"AnswerAccepted", "ContextRewritten", "TurnAborted"}


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


def test_a_subscriber_that_comes_after_unheard_turns_is_told_what_replay_tells() -> (
    None
):
    model = ScriptedModel()
    for _ in range(3):
        model.add(
            calls(tool_call("echo", {"text": "hi"}), usage={"input_tokens": 7}),
            "done",
        )
    with Runtime.open("memory://") as rt:
        session = rt.create_session(Agent("a", model=model, tools=[echo]))
        session.prompt("one", timeout=10)
        session.prompt("two", timeout=10)
        with session.subscribe() as subscription:
            session.prompt("three", timeout=10)
            heard = [
                item.event
                for item in subscription.drain()
                if isinstance(item, RunEvent)
            ]
        replayed = rt.replay_events(session.session_id)
        durable = [event for event in heard if event.sequence]
        assert len(durable) > 5
        assert durable == replayed[-len(durable) :]
        totals = [
            event.msg.total
            for event in durable
            if isinstance(event.msg, UsageRecordedMsg)
        ]
        # The totals count the turns nobody heard, as the log's do.
        every = [e.msg.last for e in replayed if isinstance(e.msg, UsageRecordedMsg)]
        spent = sum(u.get("input_tokens", 0) for u in every if u)
        assert totals[-1]["input_tokens"] == spent
        assert len(every) == 6  # two steps a turn, three turns
        assert spent > 3 * 7
        assert {event.turn_id for event in durable} == {replayed[-1].turn_id}
        assert replayed[-1].turn_id is not None
