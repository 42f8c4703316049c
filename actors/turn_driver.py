"""How a SessionActor carries its turns: facts in, effects out.

An object a :class:`~turnlog.actors.session_actor.SessionActor` owns. What
a turn does next is decided in one place, the session's
:class:`~turnlog.domain.turn_machine.TurnMachine`; this carries each fact
to it as one transaction (``SessionState.take``) and, once the events are
saved, runs the effects the transition named: orders to the TurnActor
(through the :class:`~turnlog.actors.turn_slot.TurnActorSlot`), tool
calls to the ToolExecutor, requests to the approval broker, and the end of
a turn: the next queued input's turn, or the end of the run and its
answer to whoever waits on it. Everything here runs on the session
actor's thread.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, assert_never

import msgspec

from turnlog.actors.agent_rules import session_rules
from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.hooks import any_implements
from turnlog.actors.messages import (
    ApprovalSettled,
    AskApproval,
    CallModel,
    PrepareStep,
    ReviewInput,
)
from turnlog.actors.session_parts import RunState
from turnlog.actors.session_state import SessionState
from turnlog.actors.turn_slot import TurnActorSlot
from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.errors import TurnlogError, UsageError
from turnlog.domain.hooks import StepInfo
from turnlog.domain.model import ModelRequest, OutputSchema, ToolSpec
from turnlog.domain.protocol import Interrupt, SessionFileReference
from turnlog.domain.rewrites import InputRewrite
from turnlog.domain.run import RunFinished, RunResult, RunStarted
from turnlog.domain.turn_facts import (
    IGNORED,
    ApprovalProviderFailed,
    AskApprovals,
    BeginTurn,
    Decide,
    Effect,
    EndTurn,
    Fact,
    PrepareModelStep,
    ReportedFact,
    Resumed,
    ReviewPrompt,
    RunModelStep,
    RunToolCalls,
    SettleApprovals,
    SteerArrived,
    SwitchAgent,
    TurnActorFailed,
    TurnFailed,
    TurnInput,
    TurnRules,
)
from turnlog.domain.turn_machine import TurnMachine

logger = logging.getLogger(__name__)

ToldFact = ReportedFact | Decide | ApprovalProviderFailed
"""The facts other actors tell a session about its running turn."""


class TurnDriver:
    """Carries one session's turn facts to its TurnMachine and runs the effects."""

    def __init__(self, state: SessionState, slot: TurnActorSlot, address: Any) -> None:
        # ``address``: where the broker sends decisions (the session's host
        # when it has one, so a decision reaches a session passivated meanwhile).
        self._state = state
        self._slot = slot
        self._address = address
        agent = state.agent
        self.reviews_input = any_implements(agent.middleware, "user_prompt")
        """Whether the agent's middleware reviews input (user_prompt hooks)."""
        # The agent's shared rules (actors.agent_rules); a handoff's, by name,
        # from a function of the state alone: a bound method of this driver
        # would make driver -> machine -> driver a cycle for the collector.
        # Only an agent in charge with handoffs can hand over, so only it
        # needs one: the rest keep no object for it.
        rules = session_rules(agent, state.settings.approval_policy, state.session_id)
        rules_for = (
            functools.partial(_rules_for, state) if agent.handoff_tools else None
        )
        self._machine = TurnMachine(rules, state, rules_for)
        self._tool_specs = _tool_specs(agent)
        self._hooks = bool(agent.middleware)
        self._output_schema = _output_schema(agent)
        # Session start hooks run before the first step this actor prepares.
        self._startup_hooks_due = True

    def _switch_agent(self, name: str) -> None:
        """A handoff put ``name`` in charge: its steps, tools and hooks now."""
        agent = self._state.agent.handoff_graph()[name]
        self._state.agent = agent
        self.reviews_input = any_implements(agent.middleware, "user_prompt")
        self._tool_specs = _tool_specs(agent)
        self._hooks = bool(agent.middleware)
        self._output_schema = _output_schema(agent)
        self._slot.use_agent(agent)

    # -- facts in ------------------------------------------------------------------

    def start(
        self,
        submission_id: str,
        kind: str,
        text: str,
        attachments: tuple[SessionFileReference, ...],
        deps: Any = None,
        *,
        input_id: tuple[str, str] = ("", ""),
    ) -> None:
        """Starts a turn for input a caller submitted to an idle session.

        ``deps``: the run's own dependencies (None: the session's);
        ``input_id``: the caller's id for the input and its digest, if any.
        """
        refs = [msgspec.to_builtins(a) for a in attachments]
        fact = TurnInput(submission_id, kind, text, refs, None, *input_id)
        self._start(fact, deps)

    def take(self, fact: ToldFact) -> None:
        """Carries a fact another actor told about the running turn."""
        if isinstance(fact, Decide | ApprovalProviderFailed):
            try:
                self._carry(fact)
            except UsageError:
                # Someone decided first (the user, or a timeout); the first
                # decision stands and this one (or this failure) is dropped.
                logger.debug("late decision dropped: %s", fact)
            return
        if isinstance(fact, TurnActorFailed):
            self._slot.forget_dead()  # nothing to tell it any more
        self._carry(fact)

    def _carry(
        self, fact: Fact, before_publish: Callable[[], None] | None = None
    ) -> None:
        """Takes ``fact`` to the machine in one transaction; runs what it asks."""
        machine = self._machine
        self._run(self._state.take(lambda: machine.take(fact), before_publish).effects)

    def decide(self, fact: Decide) -> None:
        """Records an approval decision (UsageError if it is not pending)."""
        self._carry(fact)

    def steer(
        self,
        submission_id: str,
        text: str,
        attachments: list[dict[str, Any]],
        input_id: tuple[str, str] = ("", ""),
        rewrite: InputRewrite | None = None,
    ) -> None:
        """Queues a steer for the running turn: its calls that have not
        started are skipped, and its next step takes the steer in.
        ``input_id``: the caller's id for it and its digest (domain.input_ids);
        ``rewrite``: what the user_prompt hooks rewrote it to."""
        self._carry(
            SteerArrived(submission_id, text, attachments, *input_id, rewrite=rewrite)
        )

    def interrupt(self, op: Interrupt) -> None:
        """Ends the running turn (UsageError if it is not running)."""
        self._carry(op)

    def resume(self, *, ask_approvals: bool) -> None:
        """Picks up a turn that a restart or passivation left waiting."""
        turn = self._state.turn
        if turn is None or not self._state.session.running:
            return
        self._state.run = RunState(turn.submission_id)
        self._carry(Resumed(ask_approvals))

    def warn(self, number: int | None, note: str) -> None:
        """Records a warning on the running turn (if ``number`` is it)."""
        state = self._state
        turn = state.turn if number is None else self._machine.running_turn(number)
        if turn is None:
            return  # a stale fact: it is dropped, so nothing needs a note

        def decide() -> list[Any]:
            turn.warn(note)
            return [turn]

        state.record(decide)

    def fail_after_error(self, error: TurnlogError) -> None:
        """Ends the turn a fact could not be recorded for, and its run.

        The failure is recorded if the log still shows the turn running; if
        it cannot be (the store is failing, or another writer took the
        session), the run still ends here, so no caller waits forever.
        """
        reason = f"turn failed: {type(error).__name__}: {error}"
        fact = TurnFailed(reason)
        try:
            if self._state.stale:  # decide on what the log holds, not on guesses
                self._state.reload()
                self._state.stale = False
            transition = self._state.take(lambda: self._machine.take(fact))
            if transition is not IGNORED:
                self._run(transition.effects)
                return
        except Exception:  # the store's failure, or reading the log again
            logger.exception(
                "session %s: could not record the failure", self._state.session_id
            )
        if self._state.lease_error is None:
            # The log may still show the turn running: ``catch_up`` records
            # the failure before the session takes more work.
            self._state.unsettled = reason
        if self._state.run is not None or self._slot.running is not None:
            self._end_turn(EndTurn("failed", None, reason))

    @property
    def behind(self) -> bool:
        """Whether a failed save left memory or the log to catch up."""
        return self._state.stale or self._state.unsettled is not None

    def catch_up(self) -> None:
        """Makes memory and the log agree again after a failed save.

        Reads the log again, and records the failure of a turn that the
        log still shows running but that ended here when its save failed
        (which ends the turn, so the session takes the next input). Raises
        the store's error, changing nothing, while the store still fails.
        """
        state = self._state
        if not self.behind or state.lease_error is not None:
            return
        state.reload()
        state.stale = False
        reason, state.unsettled = state.unsettled, None
        if reason is None or state.run is not None or self._slot.running is not None:
            return
        try:
            transition = state.take(lambda: self._machine.take(TurnFailed(reason)))
        except TurnlogError:
            state.unsettled = reason
            raise
        self._run(transition.effects)

    def record_failure(self, reason: str) -> None:
        """Ends the running turn in the log with the true reason, if it can.

        Otherwise reopening the session would record that the process
        stopped, which is not what happened. The actor is stopping: its
        end answers the run, so the transition's effects are not run.
        """
        fact = TurnFailed(reason)
        try:
            self._state.take(lambda: self._machine.take(fact))
        except Exception:  # the failure itself may be the store's
            logger.exception(
                "session %s: could not record its failure", self._state.session_id
            )

    def start_next_queued(self) -> bool:
        """Starts the turn of the oldest queued input; False if none started.

        None starts once close() was asked for: the close drops them.
        """
        if self._state.close_when_idle:
            return False
        fact = self._machine.next_input()
        if fact is None:
            return False
        try:
            self._start(fact)
        except TurnlogError as failure:
            logger.warning(
                "session %s: queued input failed to start: %s",
                self._state.session_id,
                failure,
            )
            return False
        return True

    def pending_approvals(self) -> list[ApprovalRequest]:
        """The requests of the running turn that wait for a decision."""
        return self._machine.pending_approvals()

    def _start(self, fact: TurnInput, deps: Any = None) -> None:
        state = self._state

        def announce() -> None:
            if state.run is None:
                state.run = RunState(fact.submission_id, deps)
                state.publish(RunStarted(state.session_id, fact.submission_id))

        self._carry(fact, announce)

    # -- effects out ---------------------------------------------------------------

    def _run(self, effects: tuple[Effect, ...]) -> None:
        state, slot = self._state, self._slot
        for effect in effects:
            match effect:
                # The effects of every turn first: each case tried is an
                # isinstance, and no effect class is another's subclass.
                case RunModelStep(turn_id=turn_id, step=step, route=route):
                    model_request = self._model_request(
                        turn_id, step, route, effect.instructions
                    )
                    # pre_tool hooks see the run; no hooks, nothing to build.
                    seen = state.run_context(turn_id) if self._hooks else None
                    slot.tell(CallModel(model_request, seen))
                case RunToolCalls(calls=calls):
                    slot.run_calls(calls, state.tool_run())
                case BeginTurn(turn=turn):
                    assert state.run is not None
                    state.run.turn_ids.append(str(turn.id))
                    slot.begin(turn)
                case EndTurn():
                    self._end_turn(effect)
                case ReviewPrompt(info=prompt):
                    run = state.run_context(prompt.turn_id)
                    slot.tell(ReviewInput(msgspec.structs.replace(prompt, context=run)))
                case PrepareModelStep(turn_id=turn_id, step=step, route=route):
                    context = tuple(state.context)
                    info = StepInfo(
                        state.session_id,
                        turn_id,
                        step,
                        route,
                        context,
                        state.run_context(turn_id),
                    )
                    startup, self._startup_hooks_due = self._startup_hooks_due, False
                    slot.tell(PrepareStep(info, startup))
                case AskApprovals(requests=requests):
                    for request in requests:
                        self._ask(request)
                case SettleApprovals(request_ids=request_ids):
                    broker = state.services.approval_broker
                    for request_id in request_ids:
                        broker.tell(ApprovalSettled(request_id))
                case SwitchAgent(agent_name=name):
                    self._switch_agent(name)
                case _:
                    assert_never(effect)

    def _model_request(
        self, turn_id: str, step: int, route: str, instructions: str | None
    ) -> ModelRequest:
        return ModelRequest(
            instructions=(
                self._state.agent.instructions if instructions is None else instructions
            ),
            items=tuple(self._state.context),
            tools=self._tool_specs,
            route=route,
            session_id=self._state.session_id,
            turn_id=turn_id,
            step=step,
            output_schema=self._output_schema,
        )

    def _ask(self, request: ApprovalRequest) -> None:
        """Asks the broker to decide a recorded request."""
        state, settings = self._state, self._state.settings
        state.services.approval_broker.tell(
            AskApproval(
                request,
                settings.approval_policy,
                settings.approval_provider,
                self._address,
                settings.approval_timeout,
            )
        )

    def _end_turn(self, end: EndTurn) -> None:
        if end.settled:
            self._slot.settled()  # the last model step was the last fact
        self._slot.end()
        self._state.turn = None
        run = self._state.run
        if run is not None:
            run.status, run.final_output, run.error = (
                end.status,
                end.final_output,
                end.error,
            )
            run.output = end.output
        if not self.start_next_queued():
            self._finish_run()

    def _finish_run(self) -> None:
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
            answer_format = state.agent.output_format
            if answer_format is not None and run.output is not msgspec.UNSET:
                result = msgspec.structs.replace(
                    result,
                    output_json=run.output,
                    typed_output=answer_format.load(run.output),
                )
            state.latest_run = result
            state.publish(RunFinished(state.session_id, run.status, result))
            for waiter in run.waiters:
                if not waiter.done():
                    waiter.set_result(result)
        if state.close_when_idle and not state.session.closed:
            state.close_session()


def _rules_for(state: SessionState, name: str) -> TurnRules:
    """The rules of agent ``name`` of the session's handoff graph."""
    agent = state.agent.handoff_graph()[name]
    return session_rules(agent, state.settings.approval_policy, state.session_id)


def _tool_specs(agent: AgentDefinition) -> tuple[ToolSpec, ...]:
    """The tools the model sees: the agent's, then its handoffs."""
    tools = tuple(tool.spec for tool in agent.tools_by_name.values())
    handoffs = agent.handoff_tools
    return (*tools, *(h.spec for h in handoffs.values())) if handoffs else tools


def _output_schema(agent: AgentDefinition) -> OutputSchema | None:
    """The schema the model's final answer must follow (None: free text)."""
    answer_format = agent.output_format
    return None if answer_format is None else answer_format.schema
