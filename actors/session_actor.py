"""The SessionActor: the single writer of one session.

Every change to the session goes through here: the actor asks the Session
and Turn aggregates to decide (they raise, recording nothing, if the change
would break an invariant), saves the resulting events in one transaction,
and only after the save has returned publishes the matching EventMsgs to
subscribers. Slow work belongs to the TurnActor, which reports facts back;
this actor never waits on another actor (it only tells), so a session is
never stuck behind its own model or tool calls, nor behind other sessions.

Asks from handles (``Submit``, ``StartPrompt``, ``Query``...) return values
or raise to the caller. Facts told by other actors never raise here: a
fact that cannot be recorded fails the turn instead of the actor.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import (
    ApprovalSettled,
    AskApproval,
    CallModel,
    CancelTurn,
    Decide,
    FollowUp,
    Query,
    RunCalls,
    StartPrompt,
    StepFailed,
    StepSucceeded,
    Submit,
    Subscribe,
    ToolFinished,
    Unsubscribe,
    UpdateSharedState,
)
from turnlog.actors.revive import load_context, load_turn
from turnlog.actors.subscribers import Subscriber
from turnlog.actors.turn_actor import TurnActor
from turnlog.domain.approval import ApprovalRequest
from turnlog.domain.context import apply_to_context, messages_of
from turnlog.domain.errors import (
    InvalidInputError,
    SessionBusyError,
    SessionClosedError,
    TurnlogError,
    UsageError,
)
from turnlog.domain.ids import new_submission_id
from turnlog.domain.model import Item, ModelRequest, final_text, tool_calls_in
from turnlog.domain.protocol import (
    ApprovalResponse,
    Event,
    EventTranslator,
    Interrupt,
    SessionFileReference,
    Shutdown,
    Steer,
    UserInput,
)
from turnlog.domain.run import (
    QueuedInput,
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    RunStatus,
)
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn

logger = logging.getLogger(__name__)

INTERRUPT_REASON = "interrupted"


class SessionServices(msgspec.Struct, frozen=True):
    """What every SessionActor of a runtime shares."""

    store: Any
    io_loop: IoLoop
    tool_executor: pykka.ActorRef[Any]
    approval_broker: pykka.ActorRef[Any]


class SessionSettings(msgspec.Struct, frozen=True):
    """Per-session run settings."""

    approval_policy: str = "ask"
    approval_provider: Any = None
    approval_timeout: float | None = None


class _Run:
    """The run in progress: from an idle session taking input to idle again."""

    def __init__(self, submission_id: str) -> None:
        self.submission_id = submission_id
        self.waiters: list[concurrent.futures.Future[RunResult]] = []
        self.turn_ids: list[str] = []
        self.final_output: str | None = None
        self.status: RunStatus = "completed"
        self.error: str | None = None


class SessionActor(pykka.ThreadingActor):
    """Owns one session: its aggregates, queue, context and subscribers."""

    def __init__(
        self,
        *,
        services: SessionServices,
        agent: AgentDefinition,
        session: Session,
        settings: SessionSettings,
    ) -> None:
        super().__init__()
        self._store = services.store
        self._services = services
        self._agent = agent
        self._settings = settings
        self._session = session
        self._session_id = session.session_id
        self._turn: Turn | None = load_turn(self._store, session)
        self._context: list[Item] = load_context(self._store, session)
        self._translator = EventTranslator(self._session_id)
        self._translator.resume(
            turn_id=str(self._turn.id) if self._turn is not None else None,
            submission_id=self._turn.submission_id if self._turn is not None else None,
            usage_totals=session.usage_totals,
            context_epoch=session.context_epoch,
        )
        self._subscribers: list[Subscriber] = []
        self._run: _Run | None = None
        self._latest_run: RunResult | None = None
        self._turn_actor: pykka.ActorRef[Any] | None = None
        self._close_when_idle = False
        self._tool_specs = tuple(tool.spec for tool in agent.tools_by_name.values())

    # -- dispatch ------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        match message:
            case StepSucceeded() | StepFailed() | ToolFinished():
                self._handle_fact(message)
                return None
            case Decide() if message.decided_by in ("user",):
                return self._decide(message)
            case Decide():
                self._handle_fact(message)
                return None
            case Submit(op=op, waiter=waiter):
                return self._submit(op, waiter)
            case FollowUp(text=text, attachments=attachments):
                return self._queue_input(text, attachments)
            case StartPrompt(text=text, attachments=attachments, waiter=waiter):
                # Told, not asked: the caller waits on ``waiter`` alone, which
                # carries a refusal as well as the run's result.
                try:
                    self._start_prompt(text, attachments, waiter)
                except TurnlogError as error:
                    waiter.set_exception(error)
                return None
            case Subscribe(subscriber=subscriber):
                self._subscribers.append(subscriber)
                return None
            case Unsubscribe(subscriber=subscriber):
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)
                subscriber.close()
                return None
            case UpdateSharedState(changes=changes):
                self._check_open()
                self._record(lambda: self._update_shared_state(changes))
                return dict(self._session.shared_state)
            case Query(what=what):
                return self._query(what)
            case _:
                msg = f"SessionActor got an unknown message: {message!r}"
                raise TypeError(msg)

    def _query(self, what: str) -> Any:
        match what:
            case "messages":
                return messages_of(self._context)
            case "context":
                return list(self._context)
            case "shared_state":
                return dict(self._session.shared_state)
            case "running":
                return self._run is not None
            case "latest_run":
                return self._latest_run
            case "active_run":
                if self._run is None:
                    return None
                return (self._run.submission_id, self._translator.turn_id)
            case "queued":
                return [
                    QueuedInput(q["submission_id"], q["kind"], q["text"])
                    for q in self._session.queued
                ]
            case "pending_approvals":
                return self._pending_approvals()
            case "closed":
                return self._session.closed
            case _:
                msg = f"unknown query {what!r}"
                raise UsageError(msg)

    def _handle_fact(self, fact: Any) -> None:
        try:
            match fact:
                case StepSucceeded():
                    self._step_succeeded(fact)
                case StepFailed():
                    self._step_failed(fact)
                case ToolFinished():
                    self._tool_finished(fact)
                case Decide():
                    try:
                        self._decide(fact)
                    except UsageError:
                        # Someone decided first (the user, or a timeout); the
                        # first decision stands and this one is dropped.
                        logger.debug("late decision dropped: %s", fact)
        except TurnlogError as error:
            logger.warning("session %s: %s", self._session_id, error)
            self._fail_turn_after_error(error)

    # -- recording and publishing -------------------------------------------

    def _record(
        self,
        decide: Callable[[], Sequence[Any]],
        before_publish: Callable[[], None] | None = None,
    ) -> None:
        """Runs ``decide``, saves the aggregates it returns, then publishes.

        ``decide`` triggers events on aggregates and returns those to save,
        all in one transaction. If deciding or saving fails, the in-memory
        aggregates are rebuilt from the log, so they never hold an event the
        log does not.
        """
        try:
            recordings = self._store.save(*decide())
        except Exception:
            self._reload()
            raise
        if before_publish is not None:
            before_publish()
        for recording in recordings:
            event = recording.domain_event
            apply_to_context(self._context, event)
            for out in self._translator.translate(event, recording.notification.id):
                self._publish(RunEvent(self._session_id, out))

    def _publish(self, item: Any) -> None:
        for subscriber in self._subscribers:
            subscriber.offer(item)

    def _reload(self) -> None:
        fresh = self._store.get(self._session.id)
        if fresh is not None:
            self._session = fresh
        self._turn = load_turn(self._store, self._session)
        self._context = load_context(self._store, self._session)

    def _check_open(self) -> None:
        if self._session.closed:
            msg = f"session {self._session_id!r} is closed"
            raise SessionClosedError(msg)

    # -- input -----------------------------------------------------------------

    def _submit(self, op: Any, waiter: Any) -> str:
        match op:
            case UserInput(text=text, attachments=attachments):
                self._check_open()
                _check_text(text)
                if self._session.running or self._run is not None:
                    submission_id = self._queue_input(text, attachments)
                else:
                    submission_id = new_submission_id()
                    self._start_turn(submission_id, "prompt", text, attachments)
                if waiter is not None and self._run is not None:
                    self._run.waiters.append(waiter)
                return submission_id
            case Steer(text=text, attachments=attachments):
                return self._queue_input(text, attachments, kind="steer")
            case Interrupt(turn_id=turn_id, clear_queue=clear_queue):
                self._interrupt(turn_id, clear_queue=clear_queue)
                return new_submission_id()
            case ApprovalResponse(request_id=request_id, decision=decision):
                self._decide(Decide(request_id, decision, "user"))
                return new_submission_id()
            case Shutdown():
                self._check_open()
                if self._session.running:
                    self._close_when_idle = True
                else:
                    self._close()
                return new_submission_id()
            case _:
                msg = f"not an Op: {op!r}"
                raise InvalidInputError(msg)

    def _queue_input(
        self,
        text: str,
        attachments: tuple[SessionFileReference, ...],
        kind: str = "follow_up",
    ) -> str:
        self._check_open()
        _check_text(text)
        submission_id = new_submission_id()
        session = self._session
        refs = [msgspec.to_builtins(a) for a in attachments]

        def decide() -> list[Any]:
            session.queue_input(submission_id, kind, text, refs)
            return [session]

        self._record(decide)
        return submission_id

    def _start_prompt(
        self,
        text: str,
        attachments: tuple[SessionFileReference, ...],
        waiter: concurrent.futures.Future[RunResult],
    ) -> str:
        self._check_open()
        _check_text(text)
        if self._run is not None or self._session.running:
            msg = (
                f"session {self._session_id!r} is running; wait for the run "
                "to end or queue the input with follow_up()"
            )
            raise SessionBusyError(msg)
        submission_id = new_submission_id()
        self._start_turn(submission_id, "prompt", text, attachments)
        assert self._run is not None
        self._run.waiters.append(waiter)
        return submission_id

    def _start_turn(
        self,
        submission_id: str,
        kind: str,
        text: str,
        attachments: tuple[SessionFileReference, ...],
    ) -> None:
        session = self._session
        holder: list[Turn] = []

        def decide() -> list[Any]:
            number = session.start_turn(submission_id)
            turn = Turn.open(self._session_id, number, submission_id)
            turn.accept_input(
                submission_id, kind, text, [msgspec.to_builtins(a) for a in attachments]
            )
            self._take_steers(turn)
            turn.start_step(session.model_route)
            holder.append(turn)
            return [session, turn]

        def announce() -> None:
            if self._run is None:
                self._run = _Run(submission_id)
                self._publish(RunStarted(self._session_id, submission_id))

        self._record(decide, before_publish=announce)
        turn = holder[0]
        self._turn = turn
        assert self._run is not None
        self._run.turn_ids.append(str(turn.id))
        self._spawn_turn_actor(turn)
        self._call_model(turn)

    def _spawn_turn_actor(self, turn: Turn) -> None:
        self._turn_actor = TurnActor.start(
            session=self.actor_ref,
            session_id=self._session_id,
            turn=turn.number,
            turn_id=str(turn.id),
            agent=self._agent,
            io_loop=self._services.io_loop,
            tool_executor=self._services.tool_executor,
        )

    def on_start(self) -> None:
        turn = self._turn
        if turn is not None and self._session.running:
            self._resume_turn(turn)

    def _resume_turn(self, turn: Turn) -> None:
        """Picks up a turn that a restart left waiting (see actors.revive)."""
        self._run = _Run(turn.submission_id)
        self._run.turn_ids.append(str(turn.id))
        self._spawn_turn_actor(turn)
        assert self._turn_actor is not None
        calls = tuple(
            {
                "call_id": call_id,
                "name": name,
                "arguments": _arguments_of(self._context, call_id),
            }
            for call_id, name in turn.open_calls.items()
        )
        if calls:
            self._turn_actor.tell(RunCalls(calls))
        for request_id, call_id in turn.pending_approvals.items():
            self._ask_approval(self._approval_request(turn, request_id, call_id))

    def _ask_approval(self, request: ApprovalRequest) -> None:
        self._services.approval_broker.tell(
            AskApproval(
                request,
                self._settings.approval_policy,
                self._settings.approval_provider,
                self.actor_ref,
                self._settings.approval_timeout,
            )
        )

    def _call_model(self, turn: Turn) -> None:
        assert self._turn_actor is not None
        request = ModelRequest(
            instructions=self._agent.instructions,
            items=tuple(self._context),
            tools=self._tool_specs,
            route=self._session.model_route,
            session_id=self._session_id,
            turn_id=str(turn.id),
            step=turn.steps,
        )
        self._turn_actor.tell(CallModel(request))

    # -- facts from the turn ----------------------------------------------------

    def _current(self, number: int) -> Turn | None:
        turn = self._turn
        if turn is None or turn.number != number or not self._session.running:
            return None  # a fact from a turn that already ended: stale
        return turn

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
        next_step: list[int] = []

        def decide() -> list[Any]:
            turn.complete_step(
                fact.step, output, response.usage, {"route": session.model_route}
            )
            session.record_usage(
                turn.number, fact.step, session.model_route, response.usage
            )
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
                next_step.append(self._start_step_or_fail(turn))
            return [session, turn]

        self._record(decide)
        if ended:
            self._turn_ended("completed", ended[0], None)
            return
        if next_step:
            self._after_step_start(turn, next_step[0])
            return
        if to_run:
            assert self._turn_actor is not None
            self._turn_actor.tell(RunCalls(tuple(to_run)))
        for request in approvals:
            self._ask_approval(request)

    def _start_step_or_fail(self, turn: Turn) -> int:
        """Starts the next step, or aborts the turn at the step limit (-> 0).

        Steers queued since the last step enter the turn first, so the
        model sees them in this step.
        """
        if turn.steps >= self._agent.max_steps:
            self._session.abort_turn(
                turn.number,
                f"step limit reached ({self._agent.max_steps} model steps)",
                failed=True,
            )
            return 0
        self._take_steers(turn)
        return turn.start_step(self._session.model_route)

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

    def _after_step_start(self, turn: Turn, step: int) -> None:
        """Calls the model for a recorded step start (0: the turn hit its limit)."""
        if step > 0:
            self._call_model(turn)
        else:
            self._turn_ended("failed", None, "step limit reached")

    def _needs_approval(self, tool: Any, arguments: str) -> bool:
        if self._settings.approval_policy == "allow":
            return False
        if tool.name in self._session.allowed_tools:
            return False
        return bool(tool.requires_approval(arguments))

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

    def _tool_finished(self, fact: ToolFinished) -> None:
        turn = self._current(fact.turn)
        if turn is None or fact.call_id not in turn.open_calls:
            return
        session = self._session
        next_step: list[int] = []

        def decide() -> list[Any]:
            turn.finish_tool_call(fact.call_id, fact.output, is_error=fact.is_error)
            if not turn.unanswered_calls():
                next_step.append(self._start_step_or_fail(turn))
            return [session, turn]

        self._record(decide)
        if next_step:
            self._after_step_start(turn, next_step[0])

    # -- approvals -------------------------------------------------------------------

    def _pending_approvals(self) -> list[ApprovalRequest]:
        turn = self._turn
        if turn is None or not self._session.running:
            return []
        return [
            self._approval_request(turn, request_id, call_id)
            for request_id, call_id in turn.pending_approvals.items()
        ]

    def _approval_request(
        self, turn: Turn, request_id: str, call_id: str
    ) -> ApprovalRequest:
        return ApprovalRequest(
            request_id,
            self._session_id,
            str(turn.id),
            call_id,
            turn.requested_calls[call_id],
            _arguments_of(self._context, call_id),
        )

    def _decide(self, message: Decide) -> None:
        turn = self._turn
        request_id = message.request_id
        if (
            turn is None
            or not self._session.running
            or request_id not in turn.pending_approvals
        ):
            msg = (
                f"approval request {request_id!r} is not pending in session "
                f"{self._session_id!r} (unknown, stale or already decided)"
            )
            raise UsageError(msg)
        decision = message.decision
        session = self._session
        run_now: list[dict[str, Any]] = []
        settled = [request_id]
        next_step: list[int] = []

        def allow(request: str, decided_as: str, decided_by: str) -> None:
            call_id = turn.pending_approvals[request]
            turn.decide_approval(request, decided_as, decided_by)
            name = turn.requested_calls[call_id]
            arguments = _arguments_of(self._context, call_id)
            turn.start_tool_call(call_id, name, arguments)
            run_now.append({"call_id": call_id, "name": name, "arguments": arguments})

        def decide() -> list[Any]:
            call_id = turn.pending_approvals[request_id]
            if decision in ("allow", "allow_session"):
                allow(request_id, decision, message.decided_by)
            if decision == "allow_session":
                name = turn.requested_calls[call_id]
                session.allow_tool_for_session(name, request_id)
                # Calls of the same tool waiting beside this one are covered.
                for other, other_call in list(turn.pending_approvals.items()):
                    if turn.requested_calls[other_call] == name:
                        allow(other, "allow", "session allowance")
                        settled.append(other)
            elif decision == "abort":
                turn.decide_approval(request_id, decision, message.decided_by)
                self._close_open_work(turn, "aborted at approval")
                session.abort_turn(turn.number, "aborted at approval", failed=False)
            elif decision != "allow":
                turn.decide_approval(request_id, decision, message.decided_by)
                reason = (
                    "approval timed out; the call was not run"
                    if decision == "timeout"
                    else "the call was denied approval and was not run"
                )
                turn.finish_tool_call(call_id, reason, is_error=True)
                if not turn.unanswered_calls():
                    next_step.append(self._start_step_or_fail(turn))
            return [session, turn]

        self._record(decide)
        for settled_id in settled:
            self._services.approval_broker.tell(ApprovalSettled(settled_id))
        if decision == "abort":
            self._turn_ended("aborted", None, "aborted at approval")
        elif run_now:
            assert self._turn_actor is not None
            self._turn_actor.tell(RunCalls(tuple(run_now)))
        elif next_step:
            self._after_step_start(turn, next_step[0])

    # -- ending turns and runs ---------------------------------------------------------

    def _close_open_work(self, turn: Turn, reason: str) -> None:
        """Answers every open call and decides every pending approval."""
        for request_id in list(turn.pending_approvals):
            turn.decide_approval(request_id, "abort", "turnlog")
        for call_id in list(turn.unanswered_calls()):
            turn.finish_tool_call(call_id, f"cancelled: {reason}", is_error=True)
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

    def _fail_turn_after_error(self, error: TurnlogError) -> None:
        """Ends the turn a fact could not be recorded for, and its run.

        The failure is recorded if the log still shows the turn running; if
        it cannot be (the store is failing, or another writer took the
        session), the run still ends here, so no caller waits forever.
        """
        reason = f"turn failed: {type(error).__name__}: {error}"
        turn, session = self._turn, self._session
        if turn is not None and session.active_turn == turn.number:

            def decide() -> list[Any]:
                self._close_open_work(turn, reason)
                session.abort_turn(turn.number, reason, failed=True)
                return [session, turn]

            try:
                self._record(decide)
            except TurnlogError:
                logger.exception(
                    "session %s: could not record the failure", self._session_id
                )
        if self._run is not None or self._turn_actor is not None:
            self._turn_ended("failed", None, reason)

    def _turn_ended(
        self, status: RunStatus, final_output: str | None, error: str | None
    ) -> None:
        if self._turn_actor is not None:
            self._turn_actor.tell(CancelTurn())
            self._turn_actor = None
        self._turn = None
        run = self._run
        if run is not None:
            run.status, run.final_output, run.error = status, final_output, error
        if not self._start_next_queued():
            self._finish_run()

    def _start_next_queued(self) -> bool:
        """Starts the turn of the oldest queued input; False if none started."""
        if not self._session.queued or self._session.closed:
            return False
        queued = self._session.queued[0]
        attachments = tuple(
            msgspec.convert(a, SessionFileReference) for a in queued["attachments"]
        )
        try:
            self._start_turn(
                queued["submission_id"], queued["kind"], queued["text"], attachments
            )
        except TurnlogError as failure:
            logger.warning(
                "session %s: queued input failed to start: %s",
                self._session_id,
                failure,
            )
            return False
        return True

    def _finish_run(self) -> None:
        run = self._run
        self._run = None
        if run is not None:
            result = RunResult(
                session_id=self._session_id,
                submission_id=run.submission_id,
                status=run.status,
                final_output=run.final_output,
                turn_ids=tuple(run.turn_ids),
                shared_state=dict(self._session.shared_state),
                usage=dict(self._session.usage_totals),
                error=run.error,
            )
            self._latest_run = result
            self._publish(RunFinished(self._session_id, run.status, result))
            for waiter in run.waiters:
                if not waiter.done():
                    waiter.set_result(result)
        if self._close_when_idle and not self._session.closed:
            self._close()

    def _update_shared_state(self, changes: dict[str, Any]) -> list[Any]:
        self._session.update_shared_state(changes)
        return [self._session]

    def _close(self) -> None:
        session = self._session

        def decide() -> list[Any]:
            session.close()
            return [session]

        self._record(decide)
        for subscriber in self._subscribers:
            subscriber.close()

    def on_stop(self) -> None:
        if self._turn_actor is not None:
            self._turn_actor.tell(CancelTurn())
        stopped = f"session {self._session_id!r} stopped before the run ended"
        waiters = list(self._run.waiters) if self._run is not None else []
        # Messages still in the inbox are never handled: answer every one a
        # caller waits on (pykka would drop told prompts silently), so no
        # prompt waits forever. Anything sent after this raises at the sender.
        inbox = self.actor_inbox
        assert isinstance(inbox, queue.Queue)  # ThreadingActor's inbox
        while True:
            try:
                envelope = inbox.get_nowait()
            except queue.Empty:
                break
            if isinstance(envelope.message, StartPrompt):
                waiters.append(envelope.message.waiter)
            if envelope.reply_to is not None:
                envelope.reply_to.set_exception(
                    exc_info=(SessionClosedError, SessionClosedError(stopped), None)
                )
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(SessionClosedError(stopped))
        for subscriber in self._subscribers:
            subscriber.close()

    def on_failure(self, *_: object) -> None:
        self.on_stop()


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        msg = f"input text must be a str, not {type(text).__name__}"
        raise InvalidInputError(msg)


def _arguments_of(context: list[Item], call_id: str) -> str:
    for item in reversed(context):
        if item.get("type") == "function_call" and item.get("call_id") == call_id:
            return str(item.get("arguments", ""))
    return "{}"


__all__ = ["Event", "SessionActor", "SessionServices", "SessionSettings"]
