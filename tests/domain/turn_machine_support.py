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
from turnlog.domain.handoff import HandoffTool, handoff_spec, handoff_tool_name
from turnlog.domain.model import (
    Item,
    ModelResponse,
    assistant_message,
    function_call,
    user_message,
)
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.domain.turn_facts import (
    AskApprovals,
    BeginTurn,
    Decide,
    Effect,
    EndTurn,
    PrepareModelStep,
    Reviewed,
    ReviewPrompt,
    RunModelStep,
    RunToolCalls,
    SettleApprovals,
    StepPrepared,
    StepSucceeded,
    SwitchAgent,
    ToolFinished,
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
        handoffs: dict[str, TurnRules] | None = None,
        **identities: Any,
    ) -> None:
        """``handoffs``: the rules of the agents "a" (these rules) may hand
        off to, by name (see handoff_rules)."""
        self.held = held or Held()
        request_ids = (f"r{n}" for n in itertools.count(1))
        if handoffs:
            identities = {**identities, **handoff_identities("a", handoffs)}
        rules = TurnRules(
            session_id=SESSION,
            max_steps=max_steps,
            prepares_steps=middleware or reviews,
            reviews_input=reviews,
            tool_names=TOOLS,
            needs_approval=lambda name, _arguments: name == "risky",
            new_request_id=lambda: next(request_ids),
            **identities,
        )

        def rules_for(name: str) -> TurnRules:
            return rules if name == "a" else (handoffs or {})[name]

        self.machine = TurnMachine(
            rules,
            self.held,
            rules_for if handoffs else None,
            record_transitions=True,
        )
        self.events: list[Any] = []

    def take(self, fact: Any) -> tuple[list[str], list[str]]:
        transition = self.machine.take(fact)
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


def describe(effect: Effect) -> str:
    """The effect as a row of the tests writes it: its name and what it names."""
    named: object
    match effect:
        case BeginTurn(turn=turn):
            named = turn.number
        case ReviewPrompt(info=info):
            named = info.text
        case PrepareModelStep(step=step) | RunModelStep(step=step):
            named = step
        case RunToolCalls(calls=calls):
            named = ",".join(call["call_id"] for call in calls)
        case AskApprovals(requests=requests):
            named = ",".join(request.call_id for request in requests)
        case SettleApprovals(request_ids=request_ids):
            named = ",".join(request_ids)
        case SwitchAgent(agent_name=name):
            named = name
        case EndTurn(status=status, final_output=output, error=error):
            named = f"{status}, {output}, {error}" + (", settled" * effect.settled)
        case _:
            assert_never(effect)
    return f"{type(effect).__name__}({named})"


def handoff_identities(name: str, targets: dict[str, TurnRules]) -> dict[str, Any]:
    """The TurnRules fields of agent ``name`` that hands off to ``targets``."""
    tools = {
        handoff_tool_name(target): HandoffTool(
            target, f"route-{target}", handoff_spec(target, "")
        )
        for target in targets
        if target != name
    }
    return {"agent_name": name, "handoffs": tools}


def handoff_rules(
    name: str,
    tools: tuple[str, ...],
    *,
    max_steps: int = 8,
    middleware: bool = False,
    back_to: str = "a",
) -> TurnRules:
    """The rules of agent ``name`` (its ``tools``, a handoff back to ``back_to``)."""
    back = handoff_tool_name(back_to)
    return TurnRules(
        session_id=SESSION,
        max_steps=max_steps,
        prepares_steps=middleware,
        reviews_input=False,
        tool_names=tools,
        needs_approval=lambda _name, _arguments: False,
        new_request_id=lambda: "r-" + name,
        agent_name=name,
        handoffs={back: HandoffTool(back_to, "default", handoff_spec(back_to, ""))},
    )


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
