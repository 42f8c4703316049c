"""Opening a session from the log, and closing what a crash left open.

Runs on the caller's thread before the session's actor starts, so the
actor begins with a consistent Session, its running Turn (if any) and the
model context folded from the turns' events.

Crash semantics: a turn still running in the log when its session is
opened was cut off by a crash. Each of its tool calls that started and
never finished is closed as an error output ("interrupted; outcome
unknown") and is not run again, because running it twice may do harm,
unless its tool is declared idempotent: then it runs again. A pending
approval stays pending and can still be decided. A turn left with nothing
to wait for is recorded as aborted (failed); the context stays valid for
the next turn, as every function call has its output.
"""

from __future__ import annotations

from turnlog.actors.session_parts import CanRecordSessions
from turnlog.domain.context import Message, fold_context, fold_conversation
from turnlog.domain.errors import ReplayError
from turnlog.domain.lineage import set_aside_turns
from turnlog.domain.model import Item
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.store.history import SessionHistory

INTERRUPTED_OUTPUT = "interrupted; outcome unknown"
NOT_RUN_OUTPUT = "not run: the session stopped before this call started"
CRASH_REASON = "the process stopped while this turn was running"


def load_context(store: CanRecordSessions, session: Session) -> list[Item]:
    """The model context: the turns of the current context epoch, folded.

    Only turns from the one that last rewrote the context (compaction) on
    are read, so opening a session costs the same however long it is.
    """
    events = SessionHistory(store).turn_events(
        session.session_id,
        session.context_start_turn,
        session.turn_count,
        owners=session.turn_owners,
        skip=frozenset(set_aside_turns(session.set_aside)),
    )
    return fold_context(events)


def load_conversation(store: CanRecordSessions, session: Session) -> list[Message]:
    """The conversation as it happened: every turn's messages, compacted or not.

    Turns a rewind set aside are left out. Read whole, so only a session
    whose context was compacted needs it (see SessionState.messages).
    """
    events = SessionHistory(store).turn_events(
        session.session_id,
        1,
        session.turn_count,
        owners=session.turn_owners,
        skip=frozenset(set_aside_turns(session.set_aside)),
    )
    return fold_conversation(events)


def load_turn(store: CanRecordSessions, session: Session) -> Turn | None:
    """The running turn's aggregate, if the session has one."""
    turn_id = session.active_turn_id()
    if turn_id is None:
        return None
    turn = store.get(turn_id)
    if turn is not None and not isinstance(turn, Turn):
        msg = f"aggregate {turn_id} of session {session.session_id!r} is no Turn"
        raise ReplayError(msg)
    return turn


def recover_turn(
    store: CanRecordSessions,
    session: Session,
    turn: Turn | None,
    idempotent_tools: frozenset[str] = frozenset(),
) -> bool:
    """Settles a turn a crash cut off; returns whether it resumes.

    A turn that was waiting for approvals, or running tools declared
    idempotent, resumes: its approvals stay pending (and can still be
    decided), its idempotent calls run again, and its calls that were
    waiting their turn to start run in it. Every other tool call that had
    started is closed as interrupted, and a turn with nothing left to
    resume is recorded as aborted (failed).
    """
    if session.active_turn is None:
        return False
    number = session.active_turn
    if turn is None:  # the crash came between TurnStarted and its turn's events
        turn = Turn.open(session.session_id, number, "recovered")
    for call_id, name in list(turn.open_calls.items()):
        if name not in idempotent_tools:
            turn.finish_tool_call(call_id, INTERRUPTED_OUTPUT, is_error=True)
    resumes = bool(turn.pending_approvals or turn.open_calls) and not turn.step_open
    waiting = set(turn.pending_approvals.values())
    for call_id in list(turn.unstarted_calls()):
        # A call waiting its turn (calls run one after another) never ran:
        # it runs in its turn if the turn resumes.
        if call_id not in waiting and not resumes:
            turn.finish_tool_call(call_id, NOT_RUN_OUTPUT, is_error=True)
    if not resumes:
        for request_id in list(turn.pending_approvals):
            turn.decide_approval(request_id, "abort", "recovery")
        for call_id in list(turn.unanswered_calls()):
            turn.finish_tool_call(call_id, INTERRUPTED_OUTPUT, is_error=True)
        if turn.step_open:
            turn.fail_step(turn.steps, "Interrupted", CRASH_REASON)
        session.abort_turn(number, CRASH_REASON, failed=True, approvals=turn.decided)
    else:
        turn.warn("the process stopped during this turn; it resumed on reopening")
    store.save(session, turn)
    return resumes
