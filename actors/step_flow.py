"""The steps of a turn: preparing, calling the model, and what its answer starts.

An object a :class:`~turnlog.actors.turn_flow.TurnFlow` owns. A step's
life, when the agent has middleware: ``PrepareStep`` (hooks, compaction, on
the TurnActor) -> ``StepPrepared`` (hook context, the compaction,
``ModelStepStarted`` recorded) -> ``CallModel`` -> ``StepSucceeded``
(pre_tool context, the output, usage, tool starts and approval requests
recorded) -> tools and approvals -> the next step. With no middleware the
preparation is skipped and each step starts in the same transaction as the
facts that made it due. A step that ends its turn reports it through the
``ended`` callback the TurnFlow gives.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from turnlog.actors.approval_flow import Approvals
from turnlog.actors.messages import (
    CallModel,
    CompactionBegan,
    PrepareStep,
    StepFailed,
    StepPrepared,
    StepSucceeded,
)
from turnlog.actors.session_state import SessionState
from turnlog.actors.turn_slot import TurnActorSlot
from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.errors import UsageError
from turnlog.domain.hooks import StepInfo
from turnlog.domain.model import (
    ModelRequest,
    final_text,
    model_identity,
    tool_calls_in,
)
from turnlog.domain.run import RunStatus
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn

INTERRUPT_REASON = "interrupted"
STEP_LIMIT = 0
"""``step_due`` answers: the turn hit its step limit (and was aborted)."""
PREPARE = -1
"""``step_due`` answers: the step is to be prepared by the hooks first."""

TurnEnded = Callable[[RunStatus, "str | None", "str | None"], None]
"""How a step reports its turn's end: (status, final output, error)."""


class StepFlow:
    """The model steps of a session's turns."""

    def __init__(
        self,
        state: SessionState,
        approvals: Approvals,
        slot: TurnActorSlot,
        ended: TurnEnded,
    ) -> None:
        self._state = state
        self._agent = state.agent
        self._approvals = approvals
        self._slot = slot
        self._ended = ended
        self._tool_specs = tuple(
            tool.spec for tool in state.agent.tools_by_name.values()
        )
        self._startup_hooks_due = True
        self._last_step_epoch = state.session.context_epoch
        # With middleware, each step is prepared by the hooks first.
        self._prepares = bool(state.agent.middleware)

    def step_due(self, turn: Turn) -> int:
        """Called while deciding, when the turn needs its next model step.

        Returns the new step's number (started, with the steers queued
        since the last step taken in first), ``PREPARE`` if the hooks must
        run first, or ``STEP_LIMIT`` after aborting a turn at its limit.
        """
        if turn.steps >= self._agent.max_steps:
            self._state.session.abort_turn(
                turn.number,
                f"step limit reached ({self._agent.max_steps} model steps)",
                failed=True,
            )
            return STEP_LIMIT
        if self._prepares:
            return PREPARE
        self._take_steers(turn)
        return self._start_step(turn, self._state.session.model_route)

    def after_step_due(self, turn: Turn, due: int) -> None:
        """Acts on what ``_step_due`` decided, once it is recorded."""
        if due == STEP_LIMIT:
            self._ended("failed", None, "step limit reached")
        elif due == PREPARE:
            info = StepInfo(
                self._state.session_id,
                str(turn.id),
                turn.steps + 1,
                self._state.session.model_route,
                tuple(self._state.context),
            )
            startup, self._startup_hooks_due = self._startup_hooks_due, False
            self._slot.tell(PrepareStep(info, startup))
        else:
            self._call_model(turn)

    def _take_steers(self, turn: Turn) -> str | None:
        """Takes the queued steers in; returns a stop their hooks asked for."""
        stop = None
        session = self._state.session
        for queued in list(session.queued):
            if queued["kind"] == "steer":
                submission_id = queued["submission_id"]
                session.take_queued(submission_id, turn.number)
                turn.accept_input(
                    submission_id, "steer", queued["text"], queued["attachments"]
                )
                contexts, asked = self._state.reviewed.pop(submission_id, ((), None))
                for kind, text in contexts:
                    turn.add_hook_context(kind, text)
                stop = stop or asked
        return stop

    def _start_step(self, turn: Turn, route: str) -> int:
        """Starts a step on ``route``, naming the model its provider is asked for."""
        try:
            model, provider = model_identity(self._agent.provider_for(route))
        except UsageError:  # no such route: the model call fails, named
            model, provider = "", ""
        return turn.start_step(route, model, provider)

    def _call_model(self, turn: Turn) -> None:
        request = ModelRequest(
            instructions=self._agent.instructions,
            items=tuple(self._state.context),
            tools=self._tool_specs,
            route=self._state.session.model_route,
            session_id=self._state.session_id,
            turn_id=str(turn.id),
            step=turn.steps,
        )
        self._slot.tell(CallModel(request))

    def compaction_began(self, fact: CompactionBegan) -> None:
        turn = self._state.current_turn(fact.turn)
        if turn is None:
            return

        def decide() -> list[Any]:
            turn.start_compaction(fact.compaction_id, fact.reason)
            return [turn]

        self._state.record(decide)

    def step_prepared(self, fact: StepPrepared) -> None:
        turn = self._state.current_turn(fact.turn)
        if turn is None or turn.step_open:
            return
        session = self._state.session
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
                close_open_work(turn, fact.error)
                session.abort_turn(turn.number, reason, failed=True)
                outcome.append("failed")
            elif (stop := fact.stop or self._take_steers(turn)) is not None:
                turn.warn(stop)
                session.complete_turn(turn.number, None)
                outcome.append("stopped")
            else:
                self._start_step(turn, route)
            return [session, turn]

        self._state.record(decide)
        if outcome == ["failed"]:
            self._ended("failed", None, f"turn failed: {fact.error}")
        elif outcome == ["stopped"]:
            self._ended("completed", None, None)
        else:
            self._call_model(turn)

    def step_succeeded(self, fact: StepSucceeded) -> None:
        turn = self._state.current_turn(fact.turn)
        if turn is None or not turn.step_open or turn.steps != fact.step:
            return
        session = self._state.session
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
                fact.step,
                output,
                response.usage,
                self._diagnostics(session),
                response.model or "",
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
                elif self._approvals.needs_approval(tool, arguments):
                    request_id = uuid.uuid4().hex
                    turn.request_approval(request_id, call_id, name, arguments)
                    approvals.append(
                        ApprovalRequest(
                            request_id,
                            self._state.session_id,
                            str(turn.id),
                            call_id,
                            name,
                            arguments,
                        )
                    )
                else:
                    turn.start_tool_call(
                        call_id, name, arguments, tool.tool_type, tool.mcp_server
                    )
                    to_run.append(call)
            if not calls:
                final = final_text(output)
                session.complete_turn(turn.number, final)
                ended.append(final)
            elif not turn.unanswered_calls():
                due.append(self.step_due(turn))
            return [session, turn]

        self._state.record(decide)
        if ended:
            self._slot.settled()  # the last model step was the last fact
            self._ended("completed", ended[0], None)
            return
        if due:
            self.after_step_due(turn, due[0])
            return
        if to_run:
            self._slot.run_calls(tuple(to_run))
        for request in approvals:
            self._approvals.ask(request)

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

    def step_failed(self, fact: StepFailed) -> None:
        turn = self._state.current_turn(fact.turn)
        if turn is None or not turn.step_open or turn.steps != fact.step:
            return
        session = self._state.session
        reason = f"model step failed: {fact.error_type}: {fact.message}"

        def decide() -> list[Any]:
            turn.fail_step(fact.step, fact.error_type, fact.message)
            session.abort_turn(turn.number, reason, failed=True)
            return [session, turn]

        self._state.record(decide)
        self._ended("failed", None, reason)


def close_open_work(turn: Turn, reason: str) -> None:
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
