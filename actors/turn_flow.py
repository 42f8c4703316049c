"""How a SessionActor runs a turn: input, tools, approvals, endings, runs.

An object a :class:`~turnlog.actors.session_actor.SessionActor` owns: the
actor owns the mailbox and the callers' asks; this owns the turn's state
machine, from a turn's start to the end of its run. Every method runs on
the session actor's thread; every change is decided by the aggregates and
recorded through ``SessionState.record`` (one transaction) before anything
is told.

The model steps themselves are the StepFlow's (actors/step_flow.py),
which this owns and which reports a turn's end back through ``turn_ended``.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from turnlog.actors.approval_flow import Approvals, arguments_of
from turnlog.actors.hooks import any_implements
from turnlog.actors.messages import (
    Decide,
    InputReviewed,
    ReviewInput,
    ToolFinished,
    TurnActorFailed,
)
from turnlog.actors.session_parts import RunState
from turnlog.actors.session_state import Reviewed, SessionState
from turnlog.actors.step_flow import INTERRUPT_REASON, StepFlow, close_open_work
from turnlog.actors.turn_slot import TurnActorSlot
from turnlog.domain.errors import TurnlogError, UsageError
from turnlog.domain.hooks import UserPromptInfo
from turnlog.domain.protocol import SessionFileReference
from turnlog.domain.run import RunFinished, RunResult, RunStarted, RunStatus
from turnlog.domain.turn import Turn

logger = logging.getLogger(__name__)


class TurnFlow:
    """The turn state machine of one session."""

    def __init__(
        self, state: SessionState, approvals: Approvals, slot: TurnActorSlot
    ) -> None:
        self._state = state
        self._agent = state.agent
        self._approvals = approvals
        self._slot = slot
        self._steps = StepFlow(state, approvals, slot, self.turn_ended)
        self._pending_input: dict[str, Any] | None = None
        # The agent is fixed for the session's life: asked once, not per turn.
        self._reviews_input = any_implements(state.agent.middleware, "user_prompt")

    # -- starting turns ----------------------------------------------------------

    def start_turn(
        self,
        submission_id: str,
        kind: str,
        text: str,
        attachments: tuple[SessionFileReference, ...],
        *,
        reviewed: Reviewed | None = None,
    ) -> None:
        """Starts a turn for the input; ``reviewed``: what its hooks answered.

        Input not reviewed yet is reviewed first (and recorded only once
        accepted); queued input was reviewed when it was submitted.
        """
        session = self._state.session
        refs = [msgspec.to_builtins(a) for a in attachments]
        review = self._reviews_input and reviewed is None
        holder: list[Turn] = []
        due: list[int] = []

        def decide() -> list[Any]:
            number = session.start_turn(submission_id)
            turn = Turn.open(self._state.session_id, number, submission_id)
            holder.append(turn)
            if not review:  # reviewed input is recorded only once accepted
                turn.accept_input(submission_id, kind, text, refs)
                contexts, stop = reviewed or ((), None)
                for hook_kind, context in contexts:
                    turn.add_hook_context(hook_kind, context)
                if stop is not None:
                    turn.warn(stop)
                    session.complete_turn(number, None)
                else:
                    due.append(self.step_due(turn))
            return [session, turn]

        def announce() -> None:
            if self._state.run is None:
                self._state.run = RunState(submission_id)
                self._state.publish(RunStarted(self._state.session_id, submission_id))

        self._state.record(decide, before_publish=announce)
        turn = holder[0]
        self._state.turn = turn
        assert self._state.run is not None
        self._state.run.turn_ids.append(str(turn.id))
        self._slot.begin(turn)
        if review:
            self._pending_input = {"kind": kind, "text": text, "attachments": refs}
            info = UserPromptInfo(
                self._state.session_id, str(turn.id), text, tuple(refs), kind
            )
            self.tell_turn(ReviewInput(info))
        elif due:
            self.after_step_due(turn, due[0])
        else:  # a user_prompt hook stopped it when it was queued
            self.turn_ended("completed", None, None)

    def tell_turn(self, message: Any) -> None:
        """Tells the TurnActor running the current turn."""
        self._slot.tell(message)

    def run_calls(self, calls: tuple[dict[str, Any], ...]) -> None:
        """Runs the current turn's tool calls recorded as started."""
        self._slot.run_calls(calls)

    def resume_turn(self, turn: Turn, *, ask_approvals: bool = True) -> None:
        """Picks up a turn that a restart left waiting (see actors.revive).

        A session revived after passivating passes ``ask_approvals=False``:
        the broker still holds its pending requests, and asking again would
        ask the provider (a person, maybe) twice.
        """
        self._state.run = RunState(turn.submission_id)
        self._state.run.turn_ids.append(str(turn.id))
        self._slot.begin(turn)
        calls = tuple(
            {
                "call_id": call_id,
                "name": name,
                "arguments": arguments_of(self._state.context, call_id),
            }
            for call_id, name in turn.open_calls.items()
        )
        if calls:
            self.run_calls(calls)
        if not ask_approvals:
            return
        for request_id, call_id in turn.pending_approvals.items():
            self._approvals.ask(self._approvals.request(turn, request_id, call_id))

    @property
    def reviews_input(self) -> bool:
        """Whether the agent's middleware reviews input (user_prompt hooks)."""
        return self._reviews_input

    @property
    def steps(self) -> StepFlow:
        """The model steps of this session's turns."""
        return self._steps

    def input_reviewed(self, fact: InputReviewed) -> None:
        turn = self._state.current_turn(fact.turn)
        pending, self._pending_input = self._pending_input, None
        if turn is None or pending is None:
            return
        session = self._state.session
        if fact.error is not None:
            self.fail_turn(turn, f"turn failed: {fact.error}")
            return
        if fact.rejection is not None:
            reason = fact.rejection

            def reject() -> list[Any]:
                turn.reject_input(turn.submission_id, reason)
                session.abort_turn(turn.number, reason, failed=False)
                return [session, turn]

            self._state.record(reject)
            self.turn_ended("aborted", None, reason)
            return
        due: list[int] = []

        def accept() -> list[Any]:
            turn.accept_input(
                turn.submission_id,
                pending["kind"],
                pending["text"],
                pending["attachments"],
            )
            for kind, text in fact.contexts:
                turn.add_hook_context(kind, text)
            if fact.stop is not None:
                turn.warn(fact.stop)
                session.complete_turn(turn.number, None)
            else:
                due.append(self.step_due(turn))
            return [session, turn]

        self._state.record(accept)
        if fact.stop is not None:
            self.turn_ended("completed", None, None)
        else:
            self.after_step_due(turn, due[0])

    # -- tools and approvals ---------------------------------------------------------

    def tool_finished(self, fact: ToolFinished) -> None:
        turn = self._state.current_turn(fact.turn)
        if turn is None or fact.call_id not in turn.open_calls:
            return
        session = self._state.session
        due: list[int] = []

        def decide() -> list[Any]:
            turn.finish_tool_call(
                fact.call_id, fact.output, is_error=fact.is_error, media=fact.media
            )
            if fact.post_context:
                turn.add_hook_context("post_tool_hook", fact.post_context)
            if fact.hook_error is not None:
                self.close_open_work(turn, fact.hook_error)
                reason = f"turn failed: {fact.hook_error}"
                session.abort_turn(turn.number, reason, failed=True)
            elif not turn.unanswered_calls():
                due.append(self.step_due(turn))
            return [session, turn]

        self._state.record(decide)
        if fact.hook_error is not None:
            self.turn_ended("failed", None, f"turn failed: {fact.hook_error}")
        elif due:
            self.after_step_due(turn, due[0])

    def decide_approval(self, message: Decide) -> None:
        """Records an approval decision; the turn goes on as it says."""
        self._approvals.decide(message, self)

    # -- ending turns ------------------------------------------------------------

    def close_open_work(self, turn: Turn, reason: str) -> None:
        """Answers every open call and settles every open approval and step."""
        close_open_work(turn, reason)

    def step_due(self, turn: Turn) -> int:
        """See :meth:`StepFlow.step_due`."""
        return self._steps.step_due(turn)

    def after_step_due(self, turn: Turn, due: int) -> None:
        """See :meth:`StepFlow.after_step_due`."""
        self._steps.after_step_due(turn, due)

    def interrupt(self, turn_id: str | None, *, clear_queue: bool = False) -> None:
        turn = self._state.turn
        if turn is None or not self._state.session.running:
            msg = f"session {self._state.session_id!r} has no running turn to interrupt"
            raise UsageError(msg)
        if turn_id is not None and turn_id != str(turn.id):
            msg = f"turn {turn_id!r} is not the running turn"
            raise UsageError(msg)
        session = self._state.session

        def decide() -> list[Any]:
            self.close_open_work(turn, INTERRUPT_REASON)
            session.abort_turn(turn.number, INTERRUPT_REASON, failed=False)
            if clear_queue:
                session.drop_queued(INTERRUPT_REASON)
            return [session, turn]

        self._state.record(decide)
        self.turn_ended("aborted", None, INTERRUPT_REASON)

    def fail_turn(self, turn: Turn, reason: str) -> None:
        session = self._state.session

        def decide() -> list[Any]:
            self.close_open_work(turn, reason)
            session.abort_turn(turn.number, reason, failed=True)
            return [session, turn]

        self._state.record(decide)
        self.turn_ended("failed", None, reason)

    def warn(self, number: int | None, note: str) -> None:
        """Records a warning on the running turn (if ``number`` is it)."""
        state = self._state
        turn = state.current_turn(number) if number is not None else state.turn
        if turn is None:
            return  # a stale fact: it is dropped, so nothing needs a note

        def decide() -> list[Any]:
            turn.warn(note)
            return [turn]

        state.record(decide)

    def turn_actor_failed(self, fact: TurnActorFailed) -> None:
        """Fails the turn whose TurnActor died."""
        turn = self._state.current_turn(fact.turn)
        self._slot.forget_dead()  # nothing to tell it any more
        if turn is not None:
            self.fail_turn(turn, f"turn failed: {fact.error}")

    def record_failure(self, reason: str) -> None:
        """Ends the running turn in the log with the true reason, if it can.

        Otherwise reopening the session would record that the process
        stopped, which is not what happened.
        """
        state = self._state
        turn, session = state.turn, state.session
        if turn is None or session.active_turn != turn.number:
            return

        def decide() -> list[Any]:
            close_open_work(turn, reason)
            session.abort_turn(turn.number, reason, failed=True)
            return [session, turn]

        try:
            state.record(decide)
        except Exception:  # the failure itself may be the store's
            logger.exception(
                "session %s: could not record its failure", state.session_id
            )

    def fail_turn_after_error(self, error: TurnlogError) -> None:
        """Ends the turn a fact could not be recorded for, and its run.

        The failure is recorded if the log still shows the turn running; if
        it cannot be (the store is failing, or another writer took the
        session), the run still ends here, so no caller waits forever.
        """
        reason = f"turn failed: {type(error).__name__}: {error}"
        turn, session = self._state.turn, self._state.session
        if turn is not None and session.active_turn == turn.number:
            try:
                self.fail_turn(turn, reason)
            except TurnlogError:
                logger.exception(
                    "session %s: could not record the failure", self._state.session_id
                )
            else:
                return
        if self._state.run is not None or self._slot.running is not None:
            self.turn_ended("failed", None, reason)

    def turn_ended(
        self, status: RunStatus, final_output: str | None, error: str | None
    ) -> None:
        self._slot.end()
        self._state.turn = None
        self._pending_input = None
        run = self._state.run
        if run is not None:
            run.status, run.final_output, run.error = status, final_output, error
        if not self.start_next_queued():
            self.finish_run()

    def start_next_queued(self) -> bool:
        """Starts the turn of the oldest queued input; False if none started."""
        session = self._state.session
        if not session.queued or session.closed:
            return False
        queued = session.queued[0]
        attachments = tuple(
            msgspec.convert(a, SessionFileReference) for a in queued["attachments"]
        )
        try:
            self.start_turn(
                queued["submission_id"],
                queued["kind"],
                queued["text"],
                attachments,
                reviewed=self._state.reviewed.pop(queued["submission_id"], None),
            )
        except TurnlogError as failure:
            logger.warning(
                "session %s: queued input failed to start: %s",
                self._state.session_id,
                failure,
            )
            return False
        return True

    def finish_run(self) -> None:
        """Ends the run in progress: tells its waiters and subscribers how."""
        state = self._state
        run, state.run = state.run, None
        if run is not None:
            result = RunResult(
                session_id=state.session_id,
                submission_id=run.submission_id,
                status=run.status,
                final_output=run.final_output,
                turn_ids=tuple(run.turn_ids),
                shared_state=dict(state.session.shared_state),
                usage=dict(state.session.usage_totals),
                error=run.error,
            )
            state.latest_run = result
            state.publish(RunFinished(state.session_id, run.status, result))
            for waiter in run.waiters:
                if not waiter.done():
                    waiter.set_result(result)
        if state.close_when_idle and not state.session.closed:
            state.close_session()
