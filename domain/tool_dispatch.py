"""When a step's tool calls start, and which ones a steer skips.

Pure functions over the running Turn. A call is recorded as started
(``ToolCallStarted``) when it is handed to the ToolExecutor, and not
before: with ``TurnRules.parallel_tool_calls`` (the default) every call of
a step that needs no decision starts as the step is recorded, each allowed
call as its decision is; without it, the calls start one after another in
the order the model gave them, each once the one before it has its
output (a call waiting for approval holds up those after it).

A steer takes effect before every call that has not started yet: those
calls are answered, unrun, with :data:`STEERED_OUTPUT` and recorded as
skipped (``ToolCallFinished.skipped == "steered"``), their approval
requests withdrawn; calls already running finish. The steer then reaches
the model in the next step, with those outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.model import Item
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.domain.turn_facts import TurnRules
from turnlog.domain.turn_records import call_item, sort_calls, start_call, take_handoffs

STEERED = "steered"
"""``ToolCallFinished.skipped`` of a call a steer skipped."""
STEERED_OUTPUT = "skipped: the user steered the turn before this call started"
"""The output the model sees for a call a steer skipped."""
STEER_DECIDER = "steer"
"""``decided_by`` of the approval request of a call a steer skipped."""


def steer_waiting(session: Session) -> bool:
    """Whether a steer is queued for the running turn's next step."""
    return any(queued["kind"] == "steer" for queued in session.queued)


def start_step_calls(
    session: Session, turn: Turn, calls: Sequence[Item], rules: TurnRules
) -> tuple[list[Item], list[ApprovalRequest]]:
    """Records what becomes of the calls a model step asked for: (to run,
    to ask), as ``turn_records.sort_calls`` says, after its handoffs.

    A steer that came while the model answered was not seen by it: then no
    call of the step starts (handoffs included), every one is skipped.
    """
    if steer_waiting(session):
        skip_unstarted(turn)
        return [], []
    calls = take_handoffs(session, turn, calls, rules)
    return sort_calls(turn, calls, rules, session.allowed_tools)


def skip_unstarted(turn: Turn) -> list[str]:
    """Answers every call of ``turn`` that has not started as skipped by a
    steer; returns the approval requests this withdrew (decided ``abort``
    by ``steer``: the broker must forget them)."""
    waiting = {call: request for request, call in turn.pending_approvals.items()}
    withdrawn: list[str] = []
    for call_id in turn.unstarted_calls():
        request_id = waiting.get(call_id)
        if request_id is not None:
            turn.decide_approval(request_id, "abort", STEER_DECIDER)
            withdrawn.append(request_id)
        turn.finish_tool_call(call_id, STEERED_OUTPUT, is_error=True, skipped=STEERED)
    return withdrawn


def start_due(turn: Turn, rules: TurnRules, context: Sequence[Item]) -> list[Item]:
    """Records the start of every call of ``turn`` that is due now; returns them.

    Due: not started, not answered, and not waiting for a decision; without
    ``parallel_tool_calls`` only the first unanswered call, once no other
    runs. A call of a tool the agent in charge lacks (asked for by an agent
    that handed off before a restart) is answered instead, unrun.
    """
    parallel = rules.parallel_tool_calls
    if not parallel and turn.open_calls:
        return []
    waiting = set(turn.pending_approvals.values())
    started: list[Item] = []
    for call_id, name in turn.unstarted_calls().items():
        if call_id in waiting:
            if parallel:
                continue
            break
        if name not in rules.tool_names:
            unrun = f"not run: the agent in charge has no tool {name!r}"
            turn.finish_tool_call(call_id, unrun, is_error=True)
            continue
        call = call_item(context, call_id, name)
        start_call(turn, rules, call_id, name, call["arguments"])
        started.append(call)
        if not parallel:
            break
    return started
