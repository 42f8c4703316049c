"""Typed final answers through the public API, on SQLite and PostgreSQL.

An agent with an ``output_type`` gets its answer validated and recorded as
JSON; ``result.output`` is the typed object, rebuilt from the log in
another runtime; an invalid answer goes back to the model with the error
until ``output_retries`` are spent, each attempt recorded.
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Literal

import msgspec
import pydantic
import pytest
from typing_extensions import TypedDict

from turnlog import (
    Agent,
    OutputValidationError,
    RunFinished,
    Runtime,
    ScriptedModel,
)
from turnlog.cli.timeline import summarize
from turnlog.events import AgentMessageDeltaMsg, AnswerRejectedMsg, TurnCompletedMsg
from turnlog.testing import wait_for


class Item(pydantic.BaseModel):
    name: str
    price: float


class Order(pydantic.BaseModel):
    items: list[Item]
    note: str | None = None


@dataclasses.dataclass
class Weather:
    city: str
    celsius: float


class Contact(TypedDict):
    name: str
    email: str


class Ticket(msgspec.Struct):
    title: str
    priority: int
    tags: list[str] = []


class Cat(pydantic.BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    good: bool


ORDER = Order(items=[Item(name="tea", price=3.5)])

KINDS = [
    (
        "pydantic model",
        Order,
        ORDER,
        {"items": [{"name": "tea", "price": 3.5}], "note": None},
    ),
    ("dataclass", Weather, Weather("Oslo", -3.0), {"city": "Oslo", "celsius": -3.0}),
    (
        "TypedDict",
        Contact,
        {"name": "Ada", "email": "ada@example.org"},
        {"name": "Ada", "email": "ada@example.org"},
    ),
    (
        "msgspec Struct",
        Ticket,
        Ticket("broken", 2),
        {"title": "broken", "priority": 2, "tags": []},
    ),
    (
        "list of models",
        list[Item],
        {"response": [{"name": "a", "price": 1}, {"name": "b", "price": 2}]},
        [{"name": "a", "price": 1.0}, {"name": "b", "price": 2.0}],
    ),
    (
        "union of models",
        Cat | Dog,
        {"response": {"kind": "dog", "good": True}},
        {"kind": "dog", "good": True},
    ),
]


@pytest.mark.parametrize(
    ("output_type", "scripted", "recorded"),
    [kind[1:] for kind in KINDS],
    ids=[kind[0] for kind in KINDS],
)
def test_each_kind_of_output_type_gives_its_typed_object(
    store_url: str, output_type: object, scripted: object, recorded: object
) -> None:
    model = ScriptedModel([scripted])
    agent = Agent("typed", model=model, output_type=output_type)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("answer", timeout=20)
        assert result.status == "completed", result.error
        expected = agent.output_format.load(recorded)  # type: ignore[union-attr]
        assert result.output == expected
        assert type(result.output) is type(expected)
        assert result.output_json == recorded
        assert result.as_json()["output"] == recorded
        assert isinstance(result.final_output, str)  # the text stays the text
        (request,) = model.requests
        assert request.output_schema is not None
        assert request.output_schema.schema["type"] == "object"
        events = rt.replay_events(session.session_id)
        done = [e.msg for e in events if isinstance(e.msg, TurnCompletedMsg)]
        assert done[-1].output == recorded


def test_an_invalid_answer_goes_back_and_the_next_one_is_taken(store_url: str) -> None:
    model = ScriptedModel(['{"items": [{"name": "tea", "price": "cheap"}]}', ORDER])
    agent = Agent("typed", model=model, output_type=Order)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("order tea", timeout=20)
        assert result.status == "completed", result.error
        assert result.output == ORDER
        assert result.output_as(Order).items[0].name == "tea"
        # the model saw why its first answer went back
        feedback = model.requests[1].items[-1]
        assert feedback["role"] == "developer"
        assert (
            "answer.items[0].price: Input should be a valid number"
            in (feedback["content"])
        )
        events = rt.replay_events(session.session_id)
        (rejected,) = [e.msg for e in events if isinstance(e.msg, AnswerRejectedMsg)]
        assert (rejected.step, rejected.attempt, rejected.final) == (1, 1, False)
        assert rejected.rejected_by == "output_type"
        assert rejected.reason.startswith("answer.items[0].price:")
        # the audit timeline says so too
        stored = [item.event() for item in rt.transcript.all(session.session_id)]
        lines = [summarize(event) for event in stored]
        assert any(
            line.startswith("answer 1 rejected by output_type, sent back")
            for line in lines
        )
        assert any(line.startswith("answer accepted:") for line in lines)


def test_spent_retries_fail_the_turn_naming_the_field(store_url: str) -> None:
    bad = '{"items": [{"name": "tea", "price": "cheap"}]}'
    model = ScriptedModel(["not json at all", bad, ORDER])
    agent = Agent("typed", model=model, output_type=Order, output_retries=1)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("order tea", timeout=20)
        assert result.status == "failed"
        assert result.error == (
            "OutputValidationError: answer.items[0].price: Input should be a "
            "valid number, unable to parse string as a number"
        )
        with pytest.raises(OutputValidationError, match=r"answer\.items\[0\]\.price"):
            _ = result.output
        assert model.remaining == 1  # two attempts, no third
        assert session.last_output() is None
        events = rt.replay_events(session.session_id)
        rejected = [e.msg for e in events if isinstance(e.msg, AnswerRejectedMsg)]
        assert [(r.attempt, r.final) for r in rejected] == [(1, False), (2, True)]
        assert rejected[0].reason.startswith("answer: not valid JSON")
        checkpoint = rt.checkpoints.load(session.session_id)
        assert checkpoint is not None
        assert checkpoint.output is msgspec.UNSET


def test_reopened_in_a_new_runtime_the_typed_answer_is_the_same(store_url: str) -> None:
    agent = Agent("typed", model=ScriptedModel([ORDER]), output_type=Order)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="typed-reopen")
        first = session.prompt("order", timeout=20).output
    again = Agent("typed", model=ScriptedModel([]), output_type=Order)
    with Runtime.open(store_url) as rt:
        reopened = rt.create_session(again, session_id="typed-reopen")
        assert reopened.last_output() == first == ORDER
        checkpoint = rt.checkpoints.load("typed-reopen")
        assert checkpoint is not None
        assert checkpoint.output == ORDER.model_dump(mode="json")
        (execution,) = rt.executions.page("typed-reopen").executions
        assert execution.output == ORDER.model_dump(mode="json")
        assert execution.outcome == "completed"


def test_the_typed_answer_arrives_with_the_final_event_and_text_streams(
    store_url: str,
) -> None:
    agent = Agent(
        "typed", model=ScriptedModel([ORDER], stream_chunk=5), output_type=Order
    )
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        with session.subscribe() as events:
            session.prompt("order", timeout=20)
            finished, seen = wait_for(events, lambda m: isinstance(m, RunFinished))
        messages = [item.event.msg for item in seen if hasattr(item, "event")]
        deltas = [m.delta for m in messages if isinstance(m, AgentMessageDeltaMsg)]
        assert "".join(deltas) == ORDER.model_dump_json()
        (done,) = [m for m in messages if isinstance(m, TurnCompletedMsg)]
        assert done.output == ORDER.model_dump(mode="json")
        assert isinstance(finished, RunFinished)
        assert finished.result.output == ORDER


def test_an_agent_without_output_type_records_what_it_did_before(
    store_url: str,
) -> None:
    model = ScriptedModel(["plain words"])
    agent = Agent("plain", model=model)
    assert agent.output_format is None
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        result = session.prompt("hi", timeout=20)
        assert result.output == "plain words"
        assert "output" not in result.as_json()
        assert model.requests[0].output_schema is None
        names = [item.name for item in rt.transcript.all(session.session_id)]
        assert "AnswerAccepted" not in names
        assert "AnswerRejected" not in names
        events = rt.replay_events(session.session_id)
        (done,) = [e for e in events if isinstance(e.msg, TurnCompletedMsg)]
        assert b'"output"' not in msgspec.json.encode(done)
        checkpoint = rt.checkpoints.load(session.session_id)
        assert checkpoint is not None
        assert "output" not in msgspec.to_builtins(checkpoint)
        assert session.last_output() is None


def test_the_output_type_is_part_of_the_digest_only_when_set() -> None:
    model = ScriptedModel([])
    plain = Agent("a", model=model)
    assert Agent("a", model=model, output_type=str).digest() == plain.digest()
    typed = Agent("a", model=model, output_type=Order)
    assert typed.digest() != plain.digest()
    assert Agent("a", model=model, output_type=Weather).digest() != typed.digest()
    clone = typed.clone(instructions="be brief")
    assert clone.output_type is Order
    assert clone.output_retries == typed.output_retries == 1
    assert typed.clone(output_retries=3).digest() != typed.digest()


def test_bad_output_settings_are_refused_at_the_boundary() -> None:
    from turnlog import InvalidInputError

    model = ScriptedModel([])
    with pytest.raises(InvalidInputError, match="output_retries"):
        Agent("a", model=model, output_type=Order, output_retries=-1)
    with pytest.raises(InvalidInputError, match="has no JSON schema"):
        Agent("a", model=model, output_type=object())


def test_output_validation_error_pickles_with_its_message() -> None:
    error = OutputValidationError(
        "answer.items[0].price: Input should be a valid number"
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is OutputValidationError
    assert str(copy) == str(error)


def test_a_trace_marks_each_rejected_answer_on_its_turn(store_url: str) -> None:
    from turnlog.projections.spans import spans_of

    model = ScriptedModel(['{"items": []', ORDER])
    agent = Agent("typed", model=model, output_type=Order)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent)
        session.prompt("order", timeout=20)
        events = [item.event() for item in rt.transcript.all(session.session_id)]
    spans = spans_of(session.session_id, events)
    marked = [
        (span.name, event.attributes)
        for span in spans
        for event in span.events
        if event.name == "turnlog.answer_rejected"
    ]
    ((name, attributes),) = marked
    assert name == "invoke_agent typed"  # the turn's span
    assert attributes["turnlog.answer.attempt"] == 1
    assert attributes["turnlog.answer.rejected_by"] == "output_type"
    assert str(attributes["turnlog.answer.reason"]).startswith("answer: not valid JSON")
    assert attributes["turnlog.answer.final"] is False
