"""Where a running turn goes next: its next model step, or its end.

The moves the turn machine's handlers share (:mod:`turnlog.domain.turn_machine`
decides which fact leads to which): input accepted into its turn, the
next model step (:meth:`TurnCourse.next_step`: start it, have the hooks
prepare it, or stop at the step limit), the calls due now, a checked
final answer, a handoff's switch of rules, and the turn's end. It holds
what they share: the rules of the agent in charge and the input under
review. Pure, like the machine: it triggers events and returns effects.
"""

from __future__ import annotations

from collections.abc import Callable

from turnlog.domain.instructions import record_instructions
from turnlog.domain.jobs import take_job_results
from turnlog.domain.rewrites import InputRewrite, rewritten_again
from turnlog.domain.tool_dispatch import start_due
from turnlog.domain.turn import Turn
from turnlog.domain.turn_endings import aborted, answered, completed
from turnlog.domain.turn_facts import (
    AnswerChecked,
    Effect,
    EndTurn,
    PrepareModelStep,
    RunModelStep,
    RunToolCalls,
    SwitchAgent,
    TurnInput,
    TurnRules,
    TurnState,
)
from turnlog.domain.turn_records import take_steers

Effects = tuple[Effect, ...]


class TurnCourse:
    """How one session's running turn goes on (one per TurnMachine)."""

    def __init__(
        self,
        rules: TurnRules,
        state: TurnState,
        rules_for: Callable[[str], TurnRules] | None = None,
    ) -> None:
        self.rules = rules
        """The rules of the agent in charge (a handoff switches them)."""
        self._rules_for = rules_for
        """The rules of another agent of the handoff graph, by name."""
        self._state = state
        self.under_review: tuple[int, TurnInput] | None = None
        """The turn whose input the hooks review, and that input."""

    def accept(
        self,
        turn: Turn,
        fact: TurnInput,
        contexts: tuple[tuple[str, str], ...],
        stop: str | None,
        rewrite: InputRewrite | None = None,
    ) -> Effects:
        """Records input entering its turn (as its hooks rewrote it); a
        hook's stop ends the turn there."""
        rewrite = rewritten_again((fact.rewritten_by, fact.original_text), rewrite)
        text, hooks, original = (
            (fact.text, fact.rewritten_by, fact.original_text)
            if rewrite is None
            else (rewrite.text, rewrite.hooks, rewrite.original)
        )
        turn.accept_input(
            turn.submission_id,
            fact.kind,
            text,
            fact.attachments,
            fact.input_id,
            rewritten_by=hooks,
            original_text=original,
        )
        for kind, text in contexts:
            turn.add_hook_context(kind, text)
        if stop is not None:
            turn.warn(stop)
            return self.complete(turn, None)
        return self.next_step(turn)

    def next_step(self, turn: Turn) -> Effects:
        """The turn needs its next model step: this decides how it gets one.

        At the agent's step limit the turn fails; with middleware the hooks
        prepare the step first (PrepareModelStep, then StepPrepared starts
        it); otherwise the step starts now, with the queued steers (and the
        results of background jobs that finished, domain.jobs) taken in.
        """
        switched = self.switch()
        rules = self.rules
        if turn.steps >= rules.max_steps:
            limit = f"step limit reached ({rules.max_steps} model steps)"
            abort = self.abort(turn, limit, failed=True, error="step limit reached")
            return (*switched, *abort)
        if rules.prepares_steps:
            route = self._state.session.model_route
            return (*switched, PrepareModelStep(turn.id_text, turn.steps + 1, route))
        take_job_results(self._state.session, turn)
        take_steers(self._state.session, turn, self._state.reviewed)
        return (*switched, *self.call_model(turn))

    def run_due(self, turn: Turn) -> Effects:
        """Starts the calls that are due now (see ``domain.tool_dispatch``)."""
        due = start_due(turn, self.rules, self._state.context)
        if not turn.unanswered_calls():  # due calls of tools no longer there
            return self.next_step(turn)
        return (RunToolCalls(tuple(due)),) if due else ()

    def switch(self) -> Effects:
        """Takes on the rules of the agent a handoff put in charge (once)."""
        name = self._state.session.handed_to
        if not name or name == self.rules.agent_name or self._rules_for is None:
            return ()
        self.rules = self._rules_for(name)
        return (SwitchAgent(name),)

    def answer(
        self, turn: Turn, step: int, text: str | None, check: AnswerChecked
    ) -> Effects:
        """A checked final answer: delivered, sent back, or the turn ends."""
        retries = self.rules.output_retries
        end = answered(self._state.session, turn, step, text, check, retries=retries)
        return self.next_step(turn) if end is None else self.ended(end)

    def call_model(self, turn: Turn, instructions: str | None = None) -> Effects:
        """Starts the turn's next model step (with the instructions a
        function gave for it, recorded)."""
        route = self._state.session.model_route
        step = turn.start_step(route, *self.rules.model_identity(route))
        record_instructions(turn, step, instructions)  # where a function gave them
        return (RunModelStep(turn.id_text, step, route, instructions),)

    def complete(
        self, turn: Turn, final_output: str | None, *, settled: bool = False
    ) -> Effects:
        """Ends the turn as completed, answering ``final_output``."""
        session = self._state.session
        return self.ended(completed(session, turn, final_output, settled=settled))

    def abort(
        self,
        turn: Turn,
        reason: str,
        *,
        failed: bool,
        cancelled: str | None = None,
        error: str | None = None,
    ) -> Effects:
        """Ends the turn early (see :func:`~turnlog.domain.turn_endings.aborted`)."""
        session = self._state.session
        return self.ended(
            aborted(
                session, turn, reason, failed=failed, cancelled=cancelled, error=error
            )
        )

    def ended(self, end: EndTurn) -> Effects:
        """The turn ended: no input is under review and no turn runs."""
        self.under_review = None
        self._state.turn = None
        return (end,)
