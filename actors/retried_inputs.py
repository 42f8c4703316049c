"""Answering a retried input from what the session already recorded.

An input that carries the caller's id (``input_id=``) is recorded with it
(domain.input_ids). When the same id comes again, the SessionActor asks
here before it decides anything: with the same content it is answered
with the original submission, and a retried prompt with its run's
result; with other content it is refused (InputConflictError), recording
nothing. An approval answer is matched by its request id: the decision
recorded for it answers a repeat, the same decision as a no-op, another
as a conflict.

A prompt's result comes from memory while its run goes on (the retry
waits for it) or was the session's latest here; otherwise it is rebuilt
from the log, so a retry reaching another process after a restart gets
it too. Everything here runs on the session actor's thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from turnlog.actors.messages import RunWaiter
from turnlog.actors.session_state import SessionState
from turnlog.domain import session as s
from turnlog.domain.answers import AnswerAccepted
from turnlog.domain.errors import UsageError
from turnlog.domain.input_ids import check_same_decision, input_digest, seen_submission
from turnlog.domain.run import RunResult, RunStatus
from turnlog.domain.session import Session
from turnlog.domain.turn_facts import Decide
from turnlog.store.history import decode_row


def retried_submission(
    state: SessionState,
    input_id: str,
    kind: str,
    text: str,
    attachments: Sequence[Any],
) -> tuple[str | None, str]:
    """(the original submission of ``input_id``, or None; the input's digest).

    No id: (None, ""), nothing to match. ``kind`` is what the caller asked
    for (prompt, follow_up, steer, peer, system).

    Raises:
        InputConflictError: the id was recorded for other content.
    """
    if not input_id:
        return None, ""
    digest = input_digest(kind, text, attachments)
    return seen_submission(state.session.input_ids, input_id, digest), digest


def answer_retried_prompt(
    state: SessionState,
    submission_id: str,
    waiter: RunWaiter[RunResult],
) -> None:
    """Answers ``waiter`` with the result of the run ``submission_id`` is in.

    While that run goes on, the waiter joins it; once it ended, the result
    is the latest run's, or rebuilt from the log.

    Raises:
        UsageError: the input never ran (it was dropped, or waits in the
            queue with no run to take it).
    """
    run = state.run
    if run is not None and _in_run(state, submission_id):
        run.waiters.append(waiter)
        return
    latest = state.latest_run
    if latest is not None and latest.submission_id == submission_id:
        waiter.set_result(latest)
        return
    result = result_from_log(state, submission_id)
    if result is None:
        msg = (
            f"input {submission_id!r} of session {state.session_id!r} has no "
            "result: it was dropped or waits in the queue"
        )
        raise UsageError(msg)
    waiter.set_result(result)


def _in_run(state: SessionState, submission_id: str) -> bool:
    """Whether the run in progress started with, runs or will run the input."""
    assert state.run is not None
    if state.run.submission_id == submission_id:
        return True
    turn = state.turn
    if turn is not None and turn.submission_id == submission_id:
        return True
    return any(q["submission_id"] == submission_id for q in state.session.queued)


def already_decided(state: SessionState, fact: Decide) -> bool:
    """Whether the user's ``fact`` repeats a decision already recorded.

    False if the request is pending (``fact`` decides it) or unknown (the
    turn machine refuses it).

    Raises:
        InputConflictError: the request was decided otherwise.
    """
    request_id, turn = fact.request_id, state.turn
    if turn is not None and request_id in turn.pending_approvals:
        return False
    decision = fact.decision
    if turn is not None and check_same_decision(request_id, turn.decided, decision):
        return True
    decided = state.session.decided_approvals
    return check_same_decision(request_id, decided, decision)


def result_from_log(state: SessionState, submission_id: str) -> RunResult | None:
    """The result of the run that ``submission_id``'s turn started, from the log.

    The run goes on from that turn as long as input was queued when a
    turn ended (the next queued input's turn is the same run's). Its
    status, final output and error are its last turn's end (the error is
    the recorded reason); its shared state and usage are the session's
    as that turn ended. None if the input's turn has not ended.
    """
    store, session = state.store, state.session
    events = [decode_row(row) for row in store.stored_rows([session.id])]
    events.sort(key=lambda event: event.originator_version)
    turn_ids: list[str] = []
    queued: set[str] = set()
    end: s.TurnCompleted | s.TurnAborted | None = None
    queued_at_end = False
    for event in events:
        match event:
            case s.InputQueued():
                queued.add(event.submission_id)
            case s.QueuedInputTaken() | s.QueuedInputDropped():
                queued.difference_update(_submissions_of(event))
            case s.TurnStarted():
                queued.discard(event.submission_id)
                if not turn_ids and event.submission_id != submission_id:
                    continue
                if end is not None and not queued_at_end:
                    break  # an idle session took new input: another run
                turn_ids.append(event.turn_id)
                end = None
            case s.TurnCompleted() | s.TurnAborted() if turn_ids:
                end, queued_at_end = event, bool(queued)
    if end is None:
        return None
    return _result(state, submission_id, turn_ids, end)


def _submissions_of(event: s.QueuedInputTaken | s.QueuedInputDropped) -> list[str]:
    if isinstance(event, s.QueuedInputTaken):
        return [event.submission_id]
    return list(event.submission_ids)


def _result(
    state: SessionState,
    submission_id: str,
    turn_ids: list[str],
    end: s.TurnCompleted | s.TurnAborted,
) -> RunResult:
    """The run's result as its last turn's ``end`` left the session."""
    then = state.store.get(state.session.id, version=end.originator_version)
    assert isinstance(then, Session)
    status: RunStatus = "completed"
    final_output, error = None, None
    if isinstance(end, s.TurnCompleted):
        final_output = end.final_output
    else:
        status, error = ("failed" if end.failed else "aborted"), end.reason
    result = RunResult(
        session_id=state.session_id,
        submission_id=submission_id,
        status=status,
        final_output=final_output,
        turn_ids=tuple(turn_ids),
        shared_state=dict(then.shared_state),
        usage=dict(then.usage_totals),
        error=error,
    )
    answer_format = state.agent.output_format
    if answer_format is None or status != "completed":
        return result
    output = _answer_of(state, turn_ids[-1])
    if output is msgspec.UNSET:
        return result
    return msgspec.structs.replace(
        result, output_json=output, typed_output=answer_format.load(output)
    )


def _answer_of(state: SessionState, turn_id: str) -> Any:
    """The answer turn ``turn_id`` accepted (its validated JSON), or UNSET."""
    answer: Any = msgspec.UNSET
    for row in sorted(state.store.stored_rows([uuid.UUID(turn_id)])):
        event = decode_row(row)
        if isinstance(event, AnswerAccepted):
            answer = event.output  # the last one accepted is the turn's
    return answer
