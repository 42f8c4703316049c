"""The turn's state machine: every decision a turn makes, and no I/O.

One fact in (input, a model step's answer, a tool's output, a decision,
an interrupt...; see :mod:`turnlog.domain.turn_facts`), a
:class:`~turnlog.domain.turn_facts.Transition` out: the events it
triggered on the Session and Turn aggregates (saved together, in one
transaction) and the effects the actors run once they are saved. The
state is the aggregates themselves, plus the input the hooks are
reviewing. ``Running`` stands for every state but ``Idle``.

Transitions (``State --(Fact)--> State [effects]``)::

    Idle      --(TurnInput)-->       Reviewing [BeginTurn, ReviewPrompt]
    Idle      --(TurnInput)-->       Preparing [BeginTurn, PrepareModelStep]
    Idle      --(TurnInput)-->       ModelCall [BeginTurn, RunModelStep]
    Idle      --(TurnInput)-->       Idle      [BeginTurn, EndTurn]
    Reviewing --(InputReviewed)-->   Preparing [PrepareModelStep]
    Reviewing --(InputReviewed)-->   Idle      [EndTurn]
    Preparing --(CompactionBegan)--> Preparing []
    Preparing --(StepPrepared)-->    ModelCall [RunModelStep]
    Preparing --(StepPrepared)-->    Idle      [EndTurn]
    ModelCall --(StepSucceeded)-->   Tools     [RunToolCalls, AskApprovals]
    ModelCall --(StepSucceeded)-->   Approval  [RunToolCalls, AskApprovals]
    ModelCall --(StepSucceeded)-->   Preparing [PrepareModelStep]
    ModelCall --(StepSucceeded)-->   ModelCall [RunModelStep]
    ModelCall --(StepSucceeded)-->   Idle      [EndTurn]
      (a checked final answer sent back to the model: Preparing, ModelCall)
    ModelCall --(StepFailed)-->      Idle      [EndTurn]
    Tools     --(ToolFinished)-->    Tools     []
    Tools     --(ToolFinished)-->    Tools     [RunToolCalls]
    Tools     --(ToolFinished)-->    Preparing [PrepareModelStep]
    Tools     --(ToolFinished)-->    ModelCall [RunModelStep]
    Tools     --(ToolFinished)-->    Idle      [EndTurn]
    Approval  --(ToolFinished)-->    Approval  []
    Approval  --(Decide)-->          Approval  [SettleApprovals, RunToolCalls]
    Approval  --(Decide)-->          Tools     [SettleApprovals, RunToolCalls]
    Approval  --(Decide)-->          Preparing [SettleApprovals, PrepareModelStep]
    Approval  --(Decide)-->          ModelCall [SettleApprovals, RunModelStep]
    Approval  --(Decide)-->          Idle      [SettleApprovals, EndTurn]
    Approval  --(ApprovalProviderFailed)--> Idle [SettleApprovals, EndTurn]
    Idle      --(SteerArrived)-->    Idle      []
    Running   --(SteerArrived)-->    Running   []
    Approval  --(SteerArrived)-->    Tools     [SettleApprovals]
    Approval  --(SteerArrived)-->    Preparing [SettleApprovals, PrepareModelStep]
    Approval  --(SteerArrived)-->    ModelCall [SettleApprovals, RunModelStep]
    Running   --(Interrupt)-->       Idle      [EndTurn]
    Running   --(TurnActorFailed)--> Idle      [EndTurn]
    Running   --(TurnFailed)-->      Idle      [EndTurn]
    Running   --(Resumed)-->         Running   [BeginTurn, RunToolCalls, AskApprovals]
    ModelCall --(StepSucceeded)-->   ModelCall [SwitchAgent, RunModelStep]

Tool calls start as they are handed over, and a steer (SteerArrived)
skips those that have not: :mod:`turnlog.domain.tool_dispatch`.

Handoffs: a step's first handoff call is answered and recorded
(AgentHandedOff); once every call is answered, SwitchAgent leads the
effects that start the next step (or the next turn's, if this one ended).

Where a turn goes once every call of a step is answered (or its input
accepted) is one function, :meth:`~turnlog.domain.turn_course.TurnCourse.next_step`:
start the next model step, have the hooks prepare it first, or stop at the
step limit; the moves the handlers share are :mod:`turnlog.domain.turn_course`.
How a turn ends (completed, with a checked answer, or cut short with
everything open settled first) is :mod:`turnlog.domain.turn_endings`;
what a fact records on the aggregates, :mod:`turnlog.domain.turn_records`.

A fact about a turn that already ended (the TurnActor's answer crossed
an interrupt) is no transition: :data:`~turnlog.domain.turn_facts.IGNORED`;
a refused one raises before it triggers anything (:meth:`TurnMachine.take`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.compaction import start_compaction
from turnlog.domain.jobs import take_job_results
from turnlog.domain.model import final_text
from turnlog.domain.protocol import Interrupt
from turnlog.domain.tool_dispatch import skip_unstarted, start_due, start_step_calls
from turnlog.domain.turn import Turn
from turnlog.domain.turn_course import Effects, TurnCourse
from turnlog.domain.turn_endings import (
    APPROVAL_ABORT_REASON,
    INTERRUPT_REASON,
    turn_to_interrupt,
)
from turnlog.domain.turn_facts import (
    IGNORED,
    ApprovalProviderFailed,
    AskApprovals,
    BeginTurn,
    CompactionBegan,
    Decide,
    Fact,
    InputReviewed,
    Phase,
    Resumed,
    ReviewPrompt,
    RunToolCalls,
    SettleApprovals,
    SteerArrived,
    StepFailed,
    StepPrepared,
    StepSucceeded,
    ToolFinished,
    Transition,
    TurnActorFailed,
    TurnFailed,
    TurnInput,
    TurnRules,
    TurnState,
    phase_of,
)
from turnlog.domain.turn_records import (
    oldest_queued,
    open_calls,
    pending_requests,
    pending_turn,
    prompt_info,
    record_decision,
    record_preparation,
    record_step,
    running_turn,
    take_steers,
)


class TurnMachine:
    """The decisions of one session's turns (one machine per SessionActor)."""

    def __init__(
        self,
        rules: TurnRules,
        state: TurnState,
        rules_for: Callable[[str], TurnRules] | None = None,
        *,
        record_transitions: bool = False,
    ) -> None:
        self._state = state
        self._course = TurnCourse(rules, state, rules_for)
        self._last_step_epoch = state.session.context_epoch
        self._record_transitions = record_transitions
        self.taken: set[tuple[str, str, str]] = set()
        """Every (state, fact, state) this machine went through, if it was
        made with ``record_transitions`` (for tests: reading the phase
        before and after every fact is a share of a turn's CPU)."""

    # -- where the turn is -----------------------------------------------------

    def phase(self) -> Phase:
        """The state of the running turn, read off the aggregates."""
        reviewing = self._course.under_review[0] if self._course.under_review else None
        return phase_of(self._state, reviewing)

    def running_turn(self, number: int, step: int | None = None) -> Turn | None:
        """The running turn if it is turn ``number`` (running model step
        ``step``, if one is given); None for a stale fact."""
        return running_turn(self._state, number, step)

    def next_input(self) -> TurnInput | None:
        """The queued input the next turn takes (the oldest), if any may start."""
        session = self._state.session
        if not session.queued or session.closed:
            return None
        return oldest_queued(session, self._state.reviewed)

    def pending_approvals(self) -> list[ApprovalRequest]:
        """The requests of the running turn that wait for a decision."""
        turn, state = self._state.turn, self._state
        if turn is None or not state.session.running:
            return []
        return pending_requests(self._course.rules.session_id, turn, state.context)

    # -- facts -------------------------------------------------------------------

    def take(self, fact: Fact) -> Transition:
        """What ``fact`` records and asks the actors to do; a refused fact
        (UsageError, SessionBusyError) raises before it triggers anything."""
        if not self._record_transitions:
            return self._decide(fact)
        before = self.phase()
        transition = self._decide(fact)
        if transition is not IGNORED:
            self.taken.add((before.value, type(fact).__name__, self.phase().value))
        return transition

    def _decide(self, fact: Fact) -> Transition:
        # A fact's handler found by its class (a match would try its cases
        # one by one, an isinstance each); a subclass's by its bases.
        for cls in type(fact).__mro__:
            handler = _HANDLERS.get(cls)
            if handler is not None:
                return handler(self, fact)
        raise AssertionError(f"no handler for {type(fact).__name__}")

    def _on_input(self, fact: TurnInput) -> Transition:
        """Starts a turn for ``fact``, reviewing it first if hooks must."""
        state, rules = self._state, self._course.rules
        session = state.session
        number = session.start_turn(
            fact.submission_id, fact.input_id, fact.input_digest
        )
        turn = Turn.open(rules.session_id, number, fact.submission_id)
        state.turn = turn
        switched = self._course.switch()
        rules = self._course.rules
        begin = BeginTurn(turn)
        if rules.reviews_input and fact.reviewed is None:
            # Recorded only once accepted: rejected input leaves no trace.
            self._course.under_review = (number, fact)
            info = prompt_info(rules.session_id, turn, fact)
            effects: Effects = (begin, ReviewPrompt(info))
        else:
            self._course.under_review = None
            contexts, stop = fact.reviewed or ((), None)
            effects = (begin, *self._course.accept(turn, fact, contexts, stop))
        return Transition((session, turn), (*switched, *effects))

    def _on_input_reviewed(self, fact: InputReviewed) -> Transition:
        """Records the reviewed input (or its refusal) and goes on."""
        turn = self.running_turn(fact.turn)
        under_review = self._course.under_review
        if turn is None or under_review is None or under_review[0] != turn.number:
            return IGNORED
        self._course.under_review = None
        if fact.error is not None:
            effects = self._course.abort(
                turn, f"turn failed: {fact.error}", failed=True
            )
        elif fact.rejection is not None:
            turn.reject_input(turn.submission_id, fact.rejection)
            effects = self._course.abort(turn, fact.rejection, failed=False)
        else:
            effects = self._course.accept(
                turn, under_review[1], fact.contexts, fact.stop, fact.rewrite
            )
        return Transition((self._state.session, turn), effects)

    def _on_compaction_began(self, fact: CompactionBegan) -> Transition:
        """Records that the hooks began compacting the context."""
        turn = self.running_turn(fact.turn)
        if turn is None:
            return IGNORED
        start_compaction(turn, fact.compaction_id, fact.reason)
        return Transition((turn,))

    def _on_step_prepared(self, fact: StepPrepared) -> Transition:
        """Records what the hooks prepared; starts the step unless they stop."""
        turn = self.running_turn(fact.turn)
        if turn is None or turn.step_open:
            return IGNORED
        session = self._state.session
        record_preparation(session, turn, fact)
        if fact.error is None:
            take_job_results(session, turn)  # as steers are, just below
        if fact.error is not None:
            reason = f"turn failed: {fact.error}"
            effects = self._course.abort(
                turn, reason, failed=True, cancelled=fact.error
            )
        elif (
            stop := fact.stop
            or take_steers(self._state.session, turn, self._state.reviewed)
        ) is not None:
            turn.warn(stop)
            effects = self._course.complete(turn, None)
        else:
            effects = self._course.call_model(turn, fact.instructions)
        return Transition((session, turn), effects)

    def _on_step_succeeded(self, fact: StepSucceeded) -> Transition:
        """Records the model's answer; runs, asks about or answers its calls."""
        turn = self.running_turn(fact.turn, fact.step)
        if turn is None:
            return IGNORED
        session = self._state.session
        output, calls = record_step(session, turn, fact, self._last_step_epoch)
        self._last_step_epoch = session.context_epoch
        if fact.stop is None and not calls and fact.answer is not None:
            effects = self._course.answer(
                turn, fact.step, final_text(output), fact.answer
            )
        elif fact.stop is not None or not calls:
            effects = self._course.complete(turn, final_text(output), settled=True)
        else:
            to_run, asks = start_step_calls(session, turn, calls, self._course.rules)
            if not turn.unanswered_calls():
                effects = self._course.next_step(
                    turn
                )  # handoffs, unknown tools, steers
            else:
                runs: Effects = (RunToolCalls(tuple(to_run)),) if to_run else ()
                effects = (*runs, AskApprovals(tuple(asks))) if asks else runs
        return Transition((session, turn), effects)

    def _on_step_failed(self, fact: StepFailed) -> Transition:
        """Records the failed model call; the turn fails with it."""
        turn = self.running_turn(fact.turn, fact.step)
        if turn is None:
            return IGNORED
        turn.fail_step(fact.step, fact.error_type, fact.message)
        reason = f"model step failed: {fact.error_type}: {fact.message}"
        effects = self._course.abort(turn, reason, failed=True)
        return Transition((self._state.session, turn), effects)

    def _on_tool_finished(self, fact: ToolFinished) -> Transition:
        """Records a tool's output; the last one makes the next step due."""
        turn = self.running_turn(fact.turn)
        if turn is None or fact.call_id not in turn.open_calls:
            return IGNORED
        turn.finish_tool_call(
            fact.call_id, fact.output, is_error=fact.is_error, media=fact.media
        )
        if fact.post_context:
            turn.add_hook_context("post_tool_hook", fact.post_context)
        effects: Effects = ()
        if fact.hook_error is not None:
            reason = f"turn failed: {fact.hook_error}"
            effects = self._course.abort(
                turn, reason, failed=True, cancelled=fact.hook_error
            )
        elif not turn.unanswered_calls():
            effects = self._course.next_step(turn)
        else:  # one after another: the next call's turn
            effects = self._course.run_due(turn)
        return Transition((self._state.session, turn), effects)

    def _on_decide(self, fact: Decide) -> Transition:
        """Records an approval decision; the turn goes on as it says.

        Raises UsageError, triggering nothing, if the request is not pending.
        """
        state, request_id = self._state, fact.request_id
        session, turn = state.session, pending_turn(state, request_id)
        if fact.decision == "abort":
            turn.decide_approval(
                request_id, fact.decision, fact.decided_by, fact.input_id
            )
            effects = self._course.abort(turn, APPROVAL_ABORT_REASON, failed=False)
            effects = (SettleApprovals((request_id,)), *effects)
            return Transition((session, turn), effects)
        settled = record_decision(session, turn, self._course.rules, fact)
        effects = (SettleApprovals(tuple(settled)),)
        if not turn.unanswered_calls():  # it answered the step's last call
            effects = (*effects, *self._course.next_step(turn))
        else:
            effects = (*effects, *self._course.run_due(turn))
        return Transition((session, turn), effects)

    def _on_steer(self, fact: SteerArrived) -> Transition:
        """Queues a steer; the running turn's calls that have not started
        are skipped, and once none runs the next step takes the steer in."""
        session, turn = self._state.session, self._state.turn
        rewrite = fact.rewrite  # as rewritten: a redacted original is stored nowhere
        session.queue_input(
            fact.submission_id,
            "steer",
            fact.text if rewrite is None else rewrite.text,
            fact.attachments,
            input_id=fact.input_id,
            input_digest=fact.input_digest,
            rewritten_by=() if rewrite is None else rewrite.hooks,
            original_text=None if rewrite is None else rewrite.original,
        )
        if self.phase() not in (Phase.TOOLS, Phase.APPROVAL):
            return Transition((session,))  # it waits for the next step
        assert turn is not None
        withdrawn = skip_unstarted(turn)
        effects: Effects = (SettleApprovals(tuple(withdrawn)),) if withdrawn else ()
        if not turn.unanswered_calls():
            effects = (*effects, *self._course.next_step(turn))
        return Transition((session, turn), effects)

    def _on_approval_failed(self, fact: ApprovalProviderFailed) -> Transition:
        """The provider failed: recorded as a failure, not as a decision; the
        call is not run and the turn fails with the provider's error.

        Raises UsageError, triggering nothing, if the request is not pending
        (decided meanwhile, by someone else: that decision stands).
        """
        state, request_id = self._state, fact.request_id
        session, turn = state.session, pending_turn(state, request_id)
        turn.fail_approval(request_id, fact.error)
        open_requests = (request_id, *turn.pending_approvals)
        reason = f"approval provider failed: {fact.error}"
        effects = self._course.abort(turn, reason, failed=True)
        return Transition((session, turn), (SettleApprovals(open_requests), *effects))

    def _on_interrupt(self, fact: Interrupt) -> Transition:
        """Ends the running turn as interrupted (and drops queued input if asked).

        Raises UsageError, triggering nothing, if that turn is not running.
        """
        session, turn = self._state.session, turn_to_interrupt(self._state, fact)
        effects = self._course.abort(turn, INTERRUPT_REASON, failed=False)
        if fact.clear_queue:
            session.drop_queued(INTERRUPT_REASON)
        return Transition((session, turn), effects)

    def _on_turn_actor_failed(self, fact: TurnActorFailed) -> Transition:
        """Fails the turn whose TurnActor died."""
        turn = self.running_turn(fact.turn)
        if turn is None:
            return IGNORED
        effects = self._course.abort(turn, f"turn failed: {fact.error}", failed=True)
        return Transition((self._state.session, turn), effects)

    def _on_turn_failed(self, fact: TurnFailed) -> Transition:
        """Fails the running turn, if the log still has it running."""
        turn, session = self._state.turn, self._state.session
        if turn is None or session.active_turn != turn.number:
            return IGNORED
        effects = self._course.abort(turn, fact.reason, failed=True)
        return Transition((session, turn), effects)

    def _on_resumed(self, fact: Resumed) -> Transition:
        """Runs again what a turn left by an earlier actor waits on."""
        turn = self._state.turn
        if turn is None or not self._state.session.running:
            return IGNORED
        calls = open_calls(turn, self._state.context)
        # One after another: the call whose turn came, if none runs.
        due = start_due(turn, self._course.rules, self._state.context)
        effects: Effects = (BeginTurn(turn),)
        if calls or due:
            effects = (*effects, RunToolCalls((*calls, *due)))
        if fact.ask_approvals and turn.pending_approvals:
            effects = (*effects, AskApprovals(tuple(self.pending_approvals())))
        return Transition((turn,) if due else (), effects)


_HANDLERS: dict[type[Any], Callable[[TurnMachine, Any], Transition]] = {
    TurnInput: TurnMachine._on_input,
    InputReviewed: TurnMachine._on_input_reviewed,
    CompactionBegan: TurnMachine._on_compaction_began,
    StepPrepared: TurnMachine._on_step_prepared,
    StepSucceeded: TurnMachine._on_step_succeeded,
    StepFailed: TurnMachine._on_step_failed,
    ToolFinished: TurnMachine._on_tool_finished,
    Decide: TurnMachine._on_decide,
    ApprovalProviderFailed: TurnMachine._on_approval_failed,
    Interrupt: TurnMachine._on_interrupt,
    TurnActorFailed: TurnMachine._on_turn_actor_failed,
    TurnFailed: TurnMachine._on_turn_failed,
    Resumed: TurnMachine._on_resumed,
    SteerArrived: TurnMachine._on_steer,
}
"""``TurnMachine._decide``'s handlers by the class of their fact: one for
each class of ``Fact`` (tests/domain/test_turn_machine_dispatch.py)."""
