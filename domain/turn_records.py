"""What the turn machine's handlers record, and read back, on the aggregates.

Pure functions over the Session and Turn aggregates and the recorded
model context: what a model step's answer and the hooks' preparation of
a step record; which of a step's calls start at once, which wait for a
decision and which are answered on the spot; the steers a step takes in;
a step's diagnostics; the queued input the next turn takes; calls and
requests as the actors are handed them. What follows from them (the next
step, the turn's end) is the machine's (:mod:`turnlog.domain.turn_machine`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.compaction import finish_compaction
from turnlog.domain.context import arguments_of
from turnlog.domain.errors import UsageError
from turnlog.domain.handoff import hand_off, handoff_output, not_taken_output
from turnlog.domain.hooks import UserPromptInfo
from turnlog.domain.ids import child_session_id
from turnlog.domain.model import Item, tool_calls_in
from turnlog.domain.protocol import SessionFileReference
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.domain.turn_facts import (
    Decide,
    Reviewed,
    StepPrepared,
    StepSucceeded,
    TurnInput,
    TurnRules,
    TurnState,
)


def record_step(
    session: Session, turn: Turn, fact: StepSucceeded, last_step_epoch: int
) -> tuple[list[Item], list[Item]]:
    """Records a model step's answer, its usage and its pre_tool hooks'
    context; returns (its output, the calls it asked for).

    A hook's stop answers every call unrun and is recorded as a warning.
    """
    usage = fact.response.usage
    output = [dict(item) for item in fact.response.output]
    calls = tool_calls_in(output)
    for _call_id, text in fact.pre_tool:
        turn.add_hook_context("pre_tool_hook", text)
    diagnostics = step_diagnostics(session, last_step_epoch)
    model = fact.response.model or ""
    turn.complete_step(fact.step, output, usage, diagnostics, model)
    session.record_usage(turn.number, fact.step, session.model_route, usage)
    if fact.stop is not None:
        for call in calls:
            not_run = "not run: a hook stopped the turn"
            turn.finish_tool_call(call["call_id"], not_run, is_error=True)
        turn.warn(fact.stop)
    return output, calls


def record_preparation(session: Session, turn: Turn, fact: StepPrepared) -> None:
    """Records what the hooks prepared a step with: their context, and the
    compaction they ran (its usage, and the new context if it succeeded)."""
    for kind, text in fact.contexts:
        turn.add_hook_context(kind, text)
    if fact.compaction is not None:
        compaction_id, items, usage = fact.compaction
        if fact.error is None:
            finish_compaction(turn, compaction_id, items, usage)
            session.rewrite_context(turn.number, ["compaction"])
        session.record_usage(
            turn.number, turn.steps, session.model_route, usage, "compaction"
        )


def sort_calls(
    turn: Turn,
    calls: Sequence[Item],
    rules: TurnRules,
    allowed: frozenset[str],
) -> tuple[list[Item], list[ApprovalRequest]]:
    """Records what becomes of each call a step asked for: (to run, to ask).

    A call of an unknown tool is answered at once with an error output; a
    call that needs approval (and whose tool the session has not allowed)
    is recorded as waiting; any other is recorded as started, or, without
    ``rules.parallel_tool_calls``, only the first (the others start in
    turn, see ``domain.tool_dispatch``).
    """
    to_run: list[Item] = []
    asks: list[ApprovalRequest] = []
    held = False  # whether the calls after this one wait for their turn
    for call in calls:
        call_id, name, arguments = call["call_id"], call["name"], call["arguments"]
        if name not in rules.tool_names:
            known = ", ".join(sorted(rules.tool_names)) or "none"
            unknown = f"unknown tool {name!r}; available tools: {known}"
            turn.finish_tool_call(call_id, unknown, is_error=True)
        elif name not in allowed and rules.needs_approval(name, arguments):
            request_id = rules.new_request_id()
            turn.request_approval(request_id, call_id, name, arguments)
            asks.append(
                ApprovalRequest(
                    request_id, rules.session_id, str(turn.id), call_id, name, arguments
                )
            )
            held = not rules.parallel_tool_calls
        elif not held:
            start_call(turn, rules, call_id, name, arguments)
            to_run.append(call)
            held = not rules.parallel_tool_calls
    return to_run, asks


def take_handoffs(
    session: Session, turn: Turn, calls: Sequence[Item], rules: TurnRules
) -> list[Item]:
    """Answers the handoff calls of a step; returns its other calls.

    The first handoff call hands the session over (AgentHandedOff); any
    other in the same step is answered with an error. The step's other
    calls run as usual, under the agent that asked for them: the agent
    handed to makes the turn's next step, once every call is answered.
    """
    rest: list[Item] = []
    taken: str | None = None
    for call in calls:
        target = rules.handoffs.get(call["name"])
        if target is None:
            rest.append(call)
        elif taken is None:
            taken = target.agent
            turn.finish_tool_call(
                call["call_id"], handoff_output(taken), is_error=False
            )
            source = rules.agent_name or session.handed_to or session.agent_name
            hand_off(
                session,
                turn_number=turn.number,
                call_id=call["call_id"],
                from_agent=source,
                target=target,
                arguments=call["arguments"],
            )
        else:
            output = not_taken_output(taken)
            turn.finish_tool_call(call["call_id"], output, is_error=True)
    return rest


def record_decision(
    session: Session, turn: Turn, rules: TurnRules, fact: Decide
) -> list[str]:
    """Records a decision other than ``abort`` on a pending request.

    Returns the requests it settled: ``allow`` allows the call;
    ``allow_session`` also allows the tool for the rest of the session,
    which covers the calls of that tool waiting beside it; ``deny`` or
    ``timeout`` answer the call with an error output. Allowed calls start
    when they are due (``domain.tool_dispatch.start_due``).
    """
    request_id, decision = fact.request_id, fact.decision
    call_id = turn.pending_approvals[request_id]
    settled: list[str] = [request_id]
    if decision in ("allow", "allow_session"):
        turn.decide_approval(request_id, decision, fact.decided_by, fact.input_id)
    if decision == "allow_session":
        name = turn.requested_calls[call_id]
        session.allow_tool_for_session(name, request_id)
        for other, other_call in list(turn.pending_approvals.items()):
            if turn.requested_calls[other_call] == name:
                turn.decide_approval(other, "allow", "session allowance")
                settled.append(other)
    elif decision != "allow":
        turn.decide_approval(request_id, decision, fact.decided_by, fact.input_id)
        reason = (
            "approval timed out; the call was not run"
            if decision == "timeout"
            else "the call was denied approval and was not run"
        )
        turn.finish_tool_call(call_id, reason, is_error=True)
    return settled


def start_call(
    turn: Turn, rules: TurnRules, call_id: str, name: str, arguments: str
) -> None:
    """Records a call's start, and the child session it runs if it runs one."""
    turn.start_tool_call(call_id, name, arguments, *rules.tool_identity(name))
    agent = rules.child_agent(name)
    if agent:
        child = child_session_id(rules.session_id, turn.number, call_id)
        turn.start_child_session(call_id, child, agent)


def call_item(context: Sequence[Item], call_id: str, name: str) -> Item:
    """Call ``call_id`` of tool ``name``, with the arguments the model gave it."""
    arguments = arguments_of(context, call_id)
    return {"call_id": call_id, "name": name, "arguments": arguments}


def open_calls(turn: Turn, context: Sequence[Item]) -> tuple[Item, ...]:
    """The calls of ``turn`` recorded as started and not finished."""
    return tuple(
        call_item(context, call_id, name) for call_id, name in turn.open_calls.items()
    )


def running_turn(state: TurnState, number: int, step: int | None = None) -> Turn | None:
    """The running turn if it is turn ``number`` (running model step
    ``step``, if one is given); None for a stale fact."""
    turn = state.turn
    if turn is None or turn.number != number or not state.session.running:
        return None
    if step is not None and (not turn.step_open or turn.steps != step):
        return None
    return turn


def pending_turn(state: TurnState, request_id: str) -> Turn:
    """The running turn, in which approval request ``request_id`` is pending.

    Raises:
        UsageError: it is not (unknown, stale or already decided).
    """
    turn, session = state.turn, state.session
    if turn is None or not session.running or request_id not in turn.pending_approvals:
        msg = (
            f"approval request {request_id!r} is not pending in session "
            f"{session.session_id!r} (unknown, stale or already decided)"
        )
        raise UsageError(msg)
    return turn


def pending_requests(
    session_id: str, turn: Turn, context: Sequence[Item]
) -> list[ApprovalRequest]:
    """The approval requests of ``turn`` that wait for a decision."""
    return [
        ApprovalRequest(
            request_id,
            session_id,
            str(turn.id),
            call_id,
            turn.requested_calls[call_id],
            arguments_of(context, call_id),
        )
        for request_id, call_id in turn.pending_approvals.items()
    ]


def prompt_info(session_id: str, turn: Turn, fact: TurnInput) -> UserPromptInfo:
    """The input ``fact`` of ``turn`` as the user_prompt hooks review it."""
    return UserPromptInfo(
        session_id, str(turn.id), fact.text, tuple(fact.attachments), fact.kind
    )


def take_steers(
    session: Session, turn: Turn, reviewed: dict[str, Reviewed]
) -> str | None:
    """Takes the queued steers into ``turn``; returns a stop their hooks asked for.

    ``reviewed`` holds what the user_prompt hooks answered for queued input;
    a steer's answers are taken out of it with the steer.
    """
    stop = None
    for queued in list(session.queued):
        if queued["kind"] == "steer":
            submission_id = queued["submission_id"]
            session.take_queued(submission_id, turn.number)
            turn.accept_input(
                submission_id,
                "steer",
                queued["text"],
                queued["attachments"],
                queued.get("input_id", ""),  # queued before input ids: none
                rewritten_by=queued.get("rewritten_by", ()),
                original_text=queued.get("original_text"),
            )
            contexts, asked = reviewed.pop(submission_id, ((), None))
            for kind, text in contexts:
                turn.add_hook_context(kind, text)
            stop = stop or asked
    return stop


def step_diagnostics(session: Session, last_step_epoch: int) -> dict[str, Any]:
    """A step's diagnostics: the route, and what the prompt cache can reuse
    (all of it, unless the context was rewritten since the last step)."""
    rewritten = session.context_epoch != last_step_epoch
    return {
        "route": session.model_route,
        "prompt_cache": {
            "context_epoch": session.context_epoch,
            "outcome": "context_rewrite" if rewritten else "append",
            "rewrite_reasons": list(session.last_rewrite_reasons) if rewritten else [],
        },
    }


def oldest_queued(session: Session, reviewed: dict[str, Reviewed]) -> TurnInput:
    """The oldest queued input as a turn's input (its hooks' answers taken out)."""
    queued = session.queued[0]
    attachments = [
        msgspec.to_builtins(msgspec.convert(a, SessionFileReference))
        for a in queued["attachments"]
    ]
    return TurnInput(
        queued["submission_id"],
        queued["kind"],
        queued["text"],
        attachments,
        reviewed.pop(queued["submission_id"], None),
        queued.get("input_id", ""),  # queued before input ids: none
        rewritten_by=tuple(queued.get("rewritten_by", ())),
        original_text=queued.get("original_text"),
    )
