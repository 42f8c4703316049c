"""How a turn ends: completed, with its checked answer, or cut short.

Pure functions over the Session and Turn aggregates, each recording the
turn's end and returning the :class:`~turnlog.domain.turn_facts.EndTurn`
effect that stops its work. A turn cut short settles everything it left
open first (:func:`aborted`). Which of them a fact leads to, and what the
machine forgets once a turn has ended, is the machine's
(:mod:`turnlog.domain.turn_machine`).
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from turnlog.domain.answers import settle_answer
from turnlog.domain.compaction import cancel_compaction, fail_compaction
from turnlog.domain.errors import UsageError
from turnlog.domain.protocol import Interrupt
from turnlog.domain.run import RunStatus
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.domain.turn_facts import AnswerChecked, EndTurn, TurnState

INTERRUPT_REASON = "interrupted"
APPROVAL_ABORT_REASON = "aborted at approval"


def completed(
    session: Session,
    turn: Turn,
    final_output: str | None,
    *,
    settled: bool = False,
    output: Any = UNSET,
) -> EndTurn:
    """Records that ``turn`` completed with ``final_output``."""
    session.complete_turn(turn.number, final_output, turn.decided)
    return EndTurn("completed", final_output, None, settled, output)


def aborted(
    session: Session,
    turn: Turn,
    reason: str,
    *,
    failed: bool,
    cancelled: str | None = None,
    error: str | None = None,
) -> EndTurn:
    """Ends ``turn`` early: every open call is answered, every open
    approval, compaction and step settled (as ``cancelled``), then the
    turn is recorded as aborted for ``reason``; ``error`` is the run's.
    """
    cancelled = reason if cancelled is None else cancelled
    close_open_work(turn, cancelled, interrupted=cancelled == INTERRUPT_REASON)
    session.abort_turn(turn.number, reason, failed=failed, approvals=turn.decided)
    status: RunStatus = "failed" if failed else "aborted"
    return EndTurn(status, None, reason if error is None else error)


def close_open_work(turn: Turn, reason: str, *, interrupted: bool = False) -> None:
    """Answers every open call of ``turn`` and settles every open approval,
    the open compaction (cancelled if ``interrupted``, else failed) and the
    open step, so the turn can end with nothing left hanging.
    """
    for request_id in list(turn.pending_approvals):
        turn.decide_approval(request_id, "abort", "turnlog")
    for call_id in list(turn.unanswered_calls()):
        turn.finish_tool_call(call_id, f"cancelled: {reason}", is_error=True)
    if turn.compaction_open is not None:
        if interrupted:
            cancel_compaction(turn, turn.compaction_open)
        else:
            fail_compaction(turn, turn.compaction_open, reason)
    if turn.step_open:
        turn.fail_step(turn.steps, "Cancelled", reason)


def answered(
    session: Session,
    turn: Turn,
    step: int,
    text: str | None,
    check: AnswerChecked,
    *,
    retries: int,
) -> EndTurn | None:
    """Records what a checked final answer comes to: the turn's end
    (delivered, stopped by a hook, or failed with its retries spent), or
    None when it goes back to the model and the next step is due."""
    match settle_answer(turn, step, check, retries):
        case "deliver":
            return completed(session, turn, text, settled=True, output=check.output)
        case "retry":
            return None
        case "stop":
            return aborted(session, turn, f"answer stopped: {check.stop}", failed=False)
        case "fail":  # retries spent: the run's error names the field
            reason = f"answer rejected: {check.rejection}"
            error = f"OutputValidationError: {check.rejection}"
            return aborted(session, turn, reason, failed=True, error=error)


def turn_to_interrupt(state: TurnState, fact: Interrupt) -> Turn:
    """The running turn ``fact`` interrupts.

    Raises:
        UsageError: that turn is not running (nothing is recorded).
    """
    turn, session = state.turn, state.session
    if turn is None or not session.running:
        msg = f"session {session.session_id!r} has no running turn to interrupt"
        raise UsageError(msg)
    if fact.turn_id is not None and fact.turn_id != str(turn.id):
        msg = f"turn {fact.turn_id!r} is not the running turn"
        raise UsageError(msg)
    return turn
