"""How a SessionActor runs a turn: steps, hooks, tools, approvals, endings.

A mixin of :class:`~turnlog.actors.session_actor.SessionActor`, kept apart
so each module has one job: the actor module owns the mailbox, recording
and runs; this one owns the turn's state machine. Every method runs on the
session actor's thread; every change is decided by the aggregates and
recorded through ``_record`` (one transaction) before anything is told.

A step's life, when the agent has middleware: ``PrepareStep`` (hooks,
compaction, on the TurnActor) -> ``StepPrepared`` (hook context, the
compaction, ``ModelStepStarted`` recorded) -> ``CallModel`` ->
``StepSucceeded`` (pre_tool context, the output, usage, tool starts and
approval requests recorded) -> tools and approvals -> the next step. With
no middleware the preparation is skipped and each step starts in the same
transaction as the facts that made it due.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from typing import Any

import msgspec
import pykka

from turnlog.actors.approval_flow import ApprovalFlow, arguments_of
from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.messages import (
    BeginTurn,
    CallModel,
    CompactionBegan,
    EndTurn,
    InputReviewed,
    PrepareStep,
    RetireTurnActor,
    ReviewInput,
    RunCalls,
    StepFailed,
    StepPrepared,
    StepSucceeded,
    ToolFinished,
    TurnActorFailed,
)
from turnlog.actors.session_parts import RunState, SessionServices, SessionSettings
from turnlog.actors.turn_actor import TurnActor
from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.context import MESSAGE_INPUT_KINDS
from turnlog.domain.errors import TurnlogError, UsageError
from turnlog.domain.hooks import StepInfo, UserPromptInfo
from turnlog.domain.model import Item, ModelRequest, ToolSpec, final_text, tool_calls_in
from turnlog.domain.protocol import SessionFileReference
from turnlog.domain.run import RunStarted, RunStatus
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn

logger = logging.getLogger(__name__)

INTERRUPT_REASON = "interrupted"
TURN_ACTOR_IDLE_SECONDS = 2.0
"""How long a session keeps its TurnActor (a thread) after a turn ends."""
STEP_LIMIT = 0
"""``_step_due`` answers: the turn hit its step limit (and was aborted)."""
PREPARE = -1
"""``_step_due`` answers: the step is to be prepared by the hooks first."""


class TurnFlow(ApprovalFlow):
    """The turn logic of a SessionActor (state lives on the actor)."""

    # Set by SessionActor.__init__.
    actor_ref: pykka.ActorRef[Any]
    _services: SessionServices
    _agent: AgentDefinition
    _settings: SessionSettings
    _session: Session
    _session_id: str
    _turn: Turn | None
    _context: list[Item]
    _run: RunState | None
    _turn_actor: pykka.ActorRef[Any] | None
    _idle_turn_actor: pykka.ActorRef[Any] | None
    _idle_since: float
    _retirement_scheduled: bool
    _tool_specs: tuple[ToolSpec, ...]
    _pending_input: dict[str, Any] | None
    _startup_hooks_due: bool
    _last_step_epoch: int
    _reviews_input: bool

    def _publish(self, item: Any) -> None:
        raise NotImplementedError

    def _finish_run(self) -> None:
        raise NotImplementedError

    def _start_next_queued(self) -> bool:
        raise NotImplementedError

    def _schedule_retirement(self, delay: float) -> None:
        """One timer at a time: back-to-back turns must not each wake the loop."""
        if self._retirement_scheduled:
            return
        self._retirement_scheduled = True
        me = self.actor_ref

        def remind() -> None:
            with contextlib.suppress(pykka.ActorDeadError):  # the session stopped
                me.tell(RetireTurnActor())

        self._services.io_loop.call_later(delay, remind)

    @property
    def _prepares(self) -> bool:
        return bool(self._agent.middleware)

    # -- starting turns ----------------------------------------------------------

    def _start_turn(
        self,
        submission_id: str,
        kind: str,
        text: str,
        attachments: tuple[SessionFileReference, ...],
    ) -> None:
        session = self._session
        refs = [msgspec.to_builtins(a) for a in attachments]
        review = self._reviews_input and kind in MESSAGE_INPUT_KINDS
        holder: list[Turn] = []
        due: list[int] = []

        def decide() -> list[Any]:
            number = session.start_turn(submission_id)
            turn = Turn.open(self._session_id, number, submission_id)
            holder.append(turn)
            if not review:  # reviewed input is recorded only once accepted
                turn.accept_input(submission_id, kind, text, refs)
                due.append(self._step_due(turn))
            return [session, turn]

        def announce() -> None:
            if self._run is None:
                self._run = RunState(submission_id)
                self._publish(RunStarted(self._session_id, submission_id))

        self._record(decide, before_publish=announce)
        turn = holder[0]
        self._turn = turn
        assert self._run is not None
        self._run.turn_ids.append(str(turn.id))
        self._spawn_turn_actor(turn)
        if review:
            self._pending_input = {"kind": kind, "text": text, "attachments": refs}
            info = UserPromptInfo(self._session_id, str(turn.id), text, tuple(refs))
            self._tell_turn(ReviewInput(info))
        else:
            self._after_step_due(turn, due[0])

    def _spawn_turn_actor(self, turn: Turn) -> None:
        idle, self._idle_turn_actor = self._idle_turn_actor, None
        if idle is not None and idle.is_alive():
            idle.tell(BeginTurn(turn.number, str(turn.id)))
            self._turn_actor = idle
            return
        self._turn_actor = TurnActor.start(
            session=self.actor_ref,
            session_id=self._session_id,
            turn=turn.number,
            turn_id=str(turn.id),
            agent=self._agent,
            io_loop=self._services.io_loop,
            tool_executor=self._services.tool_executor,
        )

    def _tell_turn(self, message: Any) -> None:
        assert self._turn_actor is not None
        self._turn_actor.tell(message)

    def _resume_turn(self, turn: Turn) -> None:
        """Picks up a turn that a restart left waiting (see actors.revive)."""
        self._run = RunState(turn.submission_id)
        self._run.turn_ids.append(str(turn.id))
        self._spawn_turn_actor(turn)
        calls = tuple(
            {
                "call_id": call_id,
                "name": name,
                "arguments": arguments_of(self._context, call_id),
            }
            for call_id, name in turn.open_calls.items()
        )
        if calls:
            self._tell_turn(RunCalls(calls))
        for request_id, call_id in turn.pending_approvals.items():
            self._ask_approval(self._approval_request(turn, request_id, call_id))

    def _current(self, number: int) -> Turn | None:
        turn = self._turn
        if turn is None or turn.number != number or not self._session.running:
            return None  # a fact from a turn that already ended: stale
        return turn

    def _input_reviewed(self, fact: InputReviewed) -> None:
        turn = self._current(fact.turn)
        pending, self._pending_input = self._pending_input, None
        if turn is None or pending is None:
            return
        session = self._session
        if fact.error is not None:
            self._fail_turn(turn, f"turn failed: {fact.error}")
            return
        if fact.rejection is not None:
            reason = fact.rejection

            def reject() -> list[Any]:
                turn.reject_input(turn.submission_id, reason)
                session.abort_turn(turn.number, reason, failed=False)
                return [session, turn]

            self._record(reject)
            self._turn_ended("aborted", None, reason)
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
                due.append(self._step_due(turn))
            return [session, turn]

        self._record(accept)
        if fact.stop is not None:
            self._turn_ended("completed", None, None)
        else:
            self._after_step_due(turn, due[0])

    # -- steps ---------------------------------------------------------------------

    def _step_due(self, turn: Turn) -> int:
        """Called while deciding, when the turn needs its next model step.

        Returns the new step's number (started, with the steers queued
        since the last step taken in first), ``PREPARE`` if the hooks must
        run first, or ``STEP_LIMIT`` after aborting a turn at its limit.
        """
        if turn.steps >= self._agent.max_steps:
            self._session.abort_turn(
                turn.number,
                f"step limit reached ({self._agent.max_steps} model steps)",
                failed=True,
            )
            return STEP_LIMIT
        if self._prepares:
            return PREPARE
        self._take_steers(turn)
        return turn.start_step(self._session.model_route)

    def _after_step_due(self, turn: Turn, due: int) -> None:
        """Acts on what ``_step_due`` decided, once it is recorded."""
        if due == STEP_LIMIT:
            self._turn_ended("failed", None, "step limit reached")
        elif due == PREPARE:
            info = StepInfo(
                self._session_id,
                str(turn.id),
                turn.steps + 1,
                self._session.model_route,
                tuple(self._context),
            )
            startup, self._startup_hooks_due = self._startup_hooks_due, False
            self._tell_turn(PrepareStep(info, startup))
        else:
            self._call_model(turn)

    def _take_steers(self, turn: Turn) -> None:
        for queued in list(self._session.queued):
            if queued["kind"] == "steer":
                self._session.take_queued(queued["submission_id"], turn.number)
                turn.accept_input(
                    queued["submission_id"],
                    "steer",
                    queued["text"],
                    queued["attachments"],
                )

    def _call_model(self, turn: Turn) -> None:
        request = ModelRequest(
            instructions=self._agent.instructions,
            items=tuple(self._context),
            tools=self._tool_specs,
            route=self._session.model_route,
            session_id=self._session_id,
            turn_id=str(turn.id),
            step=turn.steps,
        )
        self._tell_turn(CallModel(request))

    def _compaction_began(self, fact: CompactionBegan) -> None:
        turn = self._current(fact.turn)
        if turn is None:
            return

        def decide() -> list[Any]:
            turn.start_compaction(fact.compaction_id, fact.reason)
            return [turn]

        self._record(decide)

    def _step_prepared(self, fact: StepPrepared) -> None:
        turn = self._current(fact.turn)
        if turn is None or turn.step_open:
            return
        session = self._session
        route = session.model_route
        outcome: list[str] = []

        def decide() -> list[Any]:
            for kind, text in fact.contexts:
                turn.add_hook_context(kind, text)
            if fact.compaction is not None:
                compaction_id, items, usage = fact.compaction
                if fact.error is None:
                    turn.finish_compaction(compaction_id, items, usage)
                    session.rewrite_context(turn.number, ["compaction"])
                session.record_usage(
                    turn.number, turn.steps, route, usage, "compaction"
                )
            if fact.error is not None:
                reason = f"turn failed: {fact.error}"
                self._close_open_work(turn, fact.error)
                session.abort_turn(turn.number, reason, failed=True)
                outcome.append("failed")
            elif fact.stop is not None:
                turn.warn(fact.stop)
                session.complete_turn(turn.number, None)
                outcome.append("stopped")
            else:
                self._take_steers(turn)
                turn.start_step(route)
            return [session, turn]

        self._record(decide)
        if outcome == ["failed"]:
            self._turn_ended("failed", None, f"turn failed: {fact.error}")
        elif outcome == ["stopped"]:
            self._turn_ended("completed", None, None)
        else:
            self._call_model(turn)

    def _step_succeeded(self, fact: StepSucceeded) -> None:
        turn = self._current(fact.turn)
        if turn is None or not turn.step_open or turn.steps != fact.step:
            return
        session = self._session
        response = fact.response
        output = [dict(item) for item in response.output]
        calls = tool_calls_in(output)
        to_run: list[dict[str, Any]] = []
        approvals: list[ApprovalRequest] = []
        ended: list[str | None] = []
        due: list[int] = []

        def decide() -> list[Any]:
            for _call_id, text in fact.pre_tool:
                turn.add_hook_context("pre_tool_hook", text)
            turn.complete_step(
                fact.step, output, response.usage, self._diagnostics(session)
            )
            session.record_usage(
                turn.number, fact.step, session.model_route, response.usage
            )
            if fact.stop is not None:
                for call in calls:
                    turn.finish_tool_call(
                        call["call_id"],
                        "not run: a hook stopped the turn",
                        is_error=True,
                    )
                turn.warn(fact.stop)
                final = final_text(output)
                session.complete_turn(turn.number, final)
                ended.append(final)
                return [session, turn]
            tools = self._agent.tools_by_name
            for call in calls:
                call_id, name, arguments = (
                    call["call_id"],
                    call["name"],
                    call["arguments"],
                )
                tool = tools.get(name)
                if tool is None:
                    known = ", ".join(sorted(tools)) or "none"
                    turn.finish_tool_call(
                        call_id,
                        f"unknown tool {name!r}; available tools: {known}",
                        is_error=True,
                    )
                elif self._needs_approval(tool, arguments):
                    request_id = uuid.uuid4().hex
                    turn.request_approval(request_id, call_id, name, arguments)
                    approvals.append(
                        ApprovalRequest(
                            request_id,
                            self._session_id,
                            str(turn.id),
                            call_id,
                            name,
                            arguments,
                        )
                    )
                else:
                    turn.start_tool_call(call_id, name, arguments)
                    to_run.append(call)
            if not calls:
                final = final_text(output)
                session.complete_turn(turn.number, final)
                ended.append(final)
            elif not turn.unanswered_calls():
                due.append(self._step_due(turn))
            return [session, turn]

        self._record(decide)
        if ended:
            self._turn_ended("completed", ended[0], None)
            return
        if due:
            self._after_step_due(turn, due[0])
            return
        if to_run:
            self._tell_turn(RunCalls(tuple(to_run)))
        for request in approvals:
            self._ask_approval(request)

    def _diagnostics(self, session: Session) -> dict[str, Any]:
        """Step diagnostics: the route, and what the prompt cache can reuse."""
        rewritten = session.context_epoch != self._last_step_epoch
        self._last_step_epoch = session.context_epoch
        return {
            "route": session.model_route,
            "prompt_cache": {
                "context_epoch": session.context_epoch,
                "outcome": "context_rewrite" if rewritten else "append",
                "rewrite_reasons": list(session.last_rewrite_reasons)
                if rewritten
                else [],
            },
        }

    def _step_failed(self, fact: StepFailed) -> None:
        turn = self._current(fact.turn)
        if turn is None or not turn.step_open or turn.steps != fact.step:
            return
        session = self._session
        reason = f"model step failed: {fact.error_type}: {fact.message}"

        def decide() -> list[Any]:
            turn.fail_step(fact.step, fact.error_type, fact.message)
            session.abort_turn(turn.number, reason, failed=True)
            return [session, turn]

        self._record(decide)
        self._turn_ended("failed", None, reason)

    # -- tools and approvals ---------------------------------------------------------

    def _tool_finished(self, fact: ToolFinished) -> None:
        turn = self._current(fact.turn)
        if turn is None or fact.call_id not in turn.open_calls:
            return
        session = self._session
        due: list[int] = []

        def decide() -> list[Any]:
            turn.finish_tool_call(fact.call_id, fact.output, is_error=fact.is_error)
            if fact.post_context:
                turn.add_hook_context("post_tool_hook", fact.post_context)
            if fact.hook_error is not None:
                self._close_open_work(turn, fact.hook_error)
                reason = f"turn failed: {fact.hook_error}"
                session.abort_turn(turn.number, reason, failed=True)
            elif not turn.unanswered_calls():
                due.append(self._step_due(turn))
            return [session, turn]

        self._record(decide)
        if fact.hook_error is not None:
            self._turn_ended("failed", None, f"turn failed: {fact.hook_error}")
        elif due:
            self._after_step_due(turn, due[0])

    # -- ending turns ------------------------------------------------------------

    def _close_open_work(self, turn: Turn, reason: str) -> None:
        """Answers every open call and settles every open approval and step."""
        for request_id in list(turn.pending_approvals):
            turn.decide_approval(request_id, "abort", "turnlog")
        for call_id in list(turn.unanswered_calls()):
            turn.finish_tool_call(call_id, f"cancelled: {reason}", is_error=True)
        if turn.compaction_open is not None:
            if reason == INTERRUPT_REASON:
                turn.cancel_compaction(turn.compaction_open)
            else:
                turn.fail_compaction(turn.compaction_open, reason)
        if turn.step_open:
            turn.fail_step(turn.steps, "Cancelled", reason)

    def _interrupt(self, turn_id: str | None, *, clear_queue: bool = False) -> None:
        turn = self._turn
        if turn is None or not self._session.running:
            msg = f"session {self._session_id!r} has no running turn to interrupt"
            raise UsageError(msg)
        if turn_id is not None and turn_id != str(turn.id):
            msg = f"turn {turn_id!r} is not the running turn"
            raise UsageError(msg)
        session = self._session

        def decide() -> list[Any]:
            self._close_open_work(turn, INTERRUPT_REASON)
            session.abort_turn(turn.number, INTERRUPT_REASON, failed=False)
            if clear_queue:
                session.drop_queued(INTERRUPT_REASON)
            return [session, turn]

        self._record(decide)
        self._turn_ended("aborted", None, INTERRUPT_REASON)

    def _fail_turn(self, turn: Turn, reason: str) -> None:
        session = self._session

        def decide() -> list[Any]:
            self._close_open_work(turn, reason)
            session.abort_turn(turn.number, reason, failed=True)
            return [session, turn]

        self._record(decide)
        self._turn_ended("failed", None, reason)

    def _turn_actor_failed(self, fact: TurnActorFailed) -> None:
        turn = self._current(fact.turn)
        if self._turn_actor is not None and not self._turn_actor.is_alive():
            self._turn_actor = None  # nothing to tell it any more
        if self._idle_turn_actor is not None and not self._idle_turn_actor.is_alive():
            self._idle_turn_actor = None
        if turn is not None:
            self._fail_turn(turn, f"turn failed: the turn actor failed: {fact.error}")

    def _fail_turn_after_error(self, error: TurnlogError) -> None:
        """Ends the turn a fact could not be recorded for, and its run.

        The failure is recorded if the log still shows the turn running; if
        it cannot be (the store is failing, or another writer took the
        session), the run still ends here, so no caller waits forever.
        """
        reason = f"turn failed: {type(error).__name__}: {error}"
        turn, session = self._turn, self._session
        if turn is not None and session.active_turn == turn.number:
            try:
                self._fail_turn(turn, reason)
            except TurnlogError:
                logger.exception(
                    "session %s: could not record the failure", self._session_id
                )
            else:
                return
        if self._run is not None or self._turn_actor is not None:
            self._turn_ended("failed", None, reason)

    def _turn_ended(
        self, status: RunStatus, final_output: str | None, error: str | None
    ) -> None:
        if self._turn_actor is not None:
            # Kept for the next turn, which usually follows at once; retired
            # if none comes soon, so an idle session holds no second thread.
            self._turn_actor.tell(EndTurn())
            self._idle_turn_actor = self._turn_actor
            self._turn_actor = None
            self._idle_since = time.monotonic()
            self._schedule_retirement(TURN_ACTOR_IDLE_SECONDS)
        self._turn = None
        self._pending_input = None
        run = self._run
        if run is not None:
            run.status, run.final_output, run.error = status, final_output, error
        if not self._start_next_queued():
            self._finish_run()
