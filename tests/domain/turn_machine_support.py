"""What the turn machine's tests share: a machine over plain state, and facts.

A :class:`Harness` holds a TurnMachine over a :class:`Held` state (what a
SessionActor's SessionState is to it) and plays facts, "saving" each
transition's events as the SessionActor would: collected in decision
order and folded into the model context.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, assert_never

from turnlog.domain import turn_machine
from turnlog.domain.context import apply_to_context
from turnlog.domain.events import in_decision_order
from turnlog.domain.model import (
    Item,
    ModelResponse,
    assistant_message,
    function_call,
    user_message,
)
from turnlog.domain.protocol import Interrupt
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.domain.turn_facts import (
    AskApprovals,
    BeginTurn,
    CompactionBegan,
    Decide,
    Effect,
    EndTurn,
    InputReviewed,
    PrepareModelStep,
    Resumed,
    Reviewed,
    ReviewPrompt,
    RunModelStep,
    RunToolCalls,
    SettleApprovals,
    StepFailed,
    StepPrepared,
    StepSucceeded,
    ToolFinished,
    Transition,
    TurnActorFailed,
    TurnFailed,
    TurnInput,
    TurnRules,
)
from turnlog.domain.turn_machine import TurnMachine

SESSION = "s1"
TOOLS = ("echo", "risky")  # calls of "risky" need approval


def table() -> list[tuple[str, str, str]]:
    """The (state, fact, state) rows of the table in turn_machine's docstring."""
    doc = turn_machine.__doc__ or ""
    rows = re.findall(r"^\s+(\w+)\s+--\((\w+)\)-->\s+(\w+)\s+\[", doc, re.M)
    assert len(rows) > 20, "the transition table was not found"
    return rows


def matches(row: tuple[str, str, str], taken: tuple[str, str, str]) -> bool:
    def same(declared: str, state: str) -> bool:
        return declared == state or (declared == "Running" and state != "Idle")

    return row[1] == taken[1] and same(row[0], taken[0]) and same(row[2], taken[2])


class Held:
    """The state a machine reads and changes (a SessionActor's SessionState)."""

    def __init__(self) -> None:
        self.session = Session.create(
            SESSION,
            agent_name="a",
            agent_digest="d",
            shared_state={},
            model_route="default",
        )
        self.session.collect_events()
        self.turn: Turn | None = None
        self.context: list[Item] = []
        self.reviewed: dict[str, Reviewed] = {}


class Harness:
    """A machine over a Held state; ``take`` plays a fact and "saves" it."""

    def __init__(
        self,
        *,
        middleware: bool = False,
        reviews: bool = False,
        max_steps: int = 8,
        held: Held | None = None,
    ) -> None:
        self.held = held or Held()
        request_ids = (f"r{n}" for n in itertools.count(1))
        rules = TurnRules(
            session_id=SESSION,
            max_steps=max_steps,
            prepares_steps=middleware or reviews,
            reviews_input=reviews,
            tool_names=TOOLS,
            needs_approval=lambda name, _arguments: name == "risky",
            new_request_id=lambda: next(request_ids),
        )
        self.machine = TurnMachine(rules, self.held)
        self.events: list[Any] = []

    def take(self, fact: Any) -> tuple[list[str], list[str]]:
        transition = play(self.machine, fact)
        for taken in self.machine.taken:
            assert any(matches(row, taken) for row in table()), taken
        events = in_decision_order(transition.record)
        self.events = events
        for event in events:
            apply_to_context(self.held.context, event)
        return [type(e).__name__ for e in events], [
            describe(e) for e in transition.effects
        ]

    def queue(self, submission_id: str, kind: str, text: str) -> None:
        self.held.session.queue_input(submission_id, kind, text, [])
        self.held.session.collect_events()


def play(machine: TurnMachine, fact: Any) -> Transition:
    match fact:
        case TurnInput():
            return machine.on_input(fact)
        case InputReviewed():
            return machine.on_input_reviewed(fact)
        case CompactionBegan():
            return machine.on_compaction_began(fact)
        case StepPrepared():
            return machine.on_step_prepared(fact)
        case StepSucceeded():
            return machine.on_step_succeeded(fact)
        case StepFailed():
            return machine.on_step_failed(fact)
        case ToolFinished():
            return machine.on_tool_finished(fact)
        case Decide():
            return machine.on_decide(fact)
        case Interrupt():
            return machine.on_interrupt(fact)
        case TurnActorFailed():
            return machine.on_turn_actor_failed(fact)
        case TurnFailed():
            return machine.on_turn_failed(fact)
        case Resumed():
            return machine.on_resumed(fact)
    raise AssertionError(fact)


def describe(effect: Effect) -> str:
    match effect:
        case BeginTurn(turn=turn):
            return f"BeginTurn({turn.number})"
        case ReviewPrompt(info=info):
            return f"ReviewPrompt({info.text})"
        case PrepareModelStep(step=step):
            return f"PrepareModelStep({step})"
        case RunModelStep(step=step):
            return f"RunModelStep({step})"
        case RunToolCalls(calls=calls):
            return f"RunToolCalls({','.join(c['call_id'] for c in calls)})"
        case AskApprovals(requests=requests):
            return f"AskApprovals({','.join(r.call_id for r in requests)})"
        case SettleApprovals(request_ids=ids):
            return f"SettleApprovals({','.join(ids)})"
        case EndTurn(status=status, final_output=output, error=error):
            settled = ", settled" if effect.settled else ""
            return f"EndTurn({status}, {output}, {error}{settled})"
        case _:
            assert_never(effect)


# --- facts --------------------------------------------------------------------

PROMPT = TurnInput("sub-1", "prompt", "hi", [])
USAGE = {"input_tokens": 3, "output_tokens": 2}


def answer(text: str, step: int = 1) -> StepSucceeded:
    return StepSucceeded(1, step, ModelResponse((assistant_message(text),), USAGE))


def calls(*names: str, step: int = 1, stop: str | None = None) -> StepSucceeded:
    output = tuple(
        function_call(f"c{n}", name, '{"x": 1}') for n, name in enumerate(names, 1)
    )
    pre_tool = (("c1", "checked"),) if stop else ()
    return StepSucceeded(1, step, ModelResponse(output, USAGE), pre_tool, stop)


def prepared(
    contexts: tuple[tuple[str, str], ...] = (),
    compaction: tuple[str, list[Any], dict[str, int] | None] | None = None,
    stop: str | None = None,
    error: str | None = None,
) -> StepPrepared:
    return StepPrepared(1, contexts, compaction, stop, error)


def finished(call_id: str, **more: Any) -> ToolFinished:
    return ToolFinished(1, call_id, f"output of {call_id}", False, **more)


def decide(request_id: str, decision: str) -> Decide:
    return Decide(request_id, decision, "user")


def queued(harness: Harness) -> None:
    harness.queue("sub-2", "steer", "and also this")


def compaction() -> tuple[str, list[Any], dict[str, int] | None]:
    return ("k1", [user_message("summary")], {"input_tokens": 5})


Given = list[Any]
"""Facts to play first; a callable is called with the harness instead."""


def harness_at(options: dict[str, Any], given: Given) -> Harness:
    harness = Harness(**options)
    for fact in given:
        if callable(fact):
            fact(harness)
        else:
            harness.take(fact)
    return harness
