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
import contextlib
import logging
import queue
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.hooks import any_implements
from turnlog.actors.messages import (
    CancelTurn,
    ChangeRoute,
    CompactionBegan,
    Decide,
    FollowUp,
    InputReviewed,
    LeaseLost,
    Query,
    RetireTurnActor,
    StartPrompt,
    StepFailed,
    StepPrepared,
    StepSucceeded,
    Submit,
    Subscribe,
    TextDelta,
    ToolFinished,
    Unsubscribe,
    UpdateSharedState,
)
from turnlog.actors.revive import load_context, load_turn
from turnlog.actors.session_parts import RunState, SessionServices, SessionSettings
from turnlog.actors.subscribers import Subscriber
from turnlog.actors.turn_flow import TURN_ACTOR_IDLE_SECONDS, TurnFlow
from turnlog.domain.chain import event_seq
from turnlog.domain.context import apply_to_context, messages_of
from turnlog.domain.errors import (
    InvalidInputError,
    LeaseLostError,
    SessionBusyError,
    SessionClosedError,
    TurnlogError,
    UsageError,
)
from turnlog.domain.ids import new_submission_id
from turnlog.domain.model import Item
from turnlog.domain.protocol import (
    AgentMessageDelta,
    ApprovalResponse,
    Event,
    EventTranslator,
    Interrupt,
    PeerInput,
    SessionFileReference,
    Shutdown,
    Steer,
    UserInput,
)
from turnlog.domain.run import QueuedInput, RunEvent, RunFinished, RunResult
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn

logger = logging.getLogger(__name__)


class SessionActor(TurnFlow, pykka.ThreadingActor):
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
        self._run: RunState | None = None
        self._latest_run: RunResult | None = None
        self._turn_actor: pykka.ActorRef[Any] | None = None
        self._idle_turn_actor: pykka.ActorRef[Any] | None = None
        self._idle_since = 0.0
        self._retirement_scheduled = False
        self._close_when_idle = False
        self._tool_specs = tuple(tool.spec for tool in agent.tools_by_name.values())
        self._pending_input: dict[str, Any] | None = None
        self._startup_hooks_due = True
        self._last_step_epoch = session.context_epoch
        self._lease_error: LeaseLostError | None = None
        # The agent is fixed for the session's life: asked once, not per turn.
        self._reviews_input = any_implements(agent.middleware, "user_prompt")

    def on_start(self) -> None:
        turn = self._turn
        if turn is not None and self._session.running:
            self._resume_turn(turn)

    # -- dispatch ------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        match message:
            case (
                StepSucceeded()
                | StepFailed()
                | ToolFinished()
                | StepPrepared()
                | CompactionBegan()
                | InputReviewed()
            ):
                self._handle_fact(message)
                return None
            case RetireTurnActor():
                self._retire_turn_actor()
                return None
            case LeaseLost(error=error):
                self._stop_for_lost_lease(error)
                return None
            case TextDelta(turn=turn, text=text):
                # Transient: published as it comes, never recorded.
                if self._current(turn) is not None:
                    self._publish_transient(AgentMessageDelta(text))
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
            case ChangeRoute(route=route):
                self._check_open()
                self._agent.provider_for(route)  # UsageError naming the routes
                session = self._session

                def change() -> list[Any]:
                    session.change_route(route)
                    return [session]

                self._record(change)
                return None
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
                case StepPrepared():
                    self._step_prepared(fact)
                case CompactionBegan():
                    self._compaction_began(fact)
                case InputReviewed():
                    self._input_reviewed(fact)
                case Decide():
                    try:
                        self._decide(fact)
                    except UsageError:
                        # Someone decided first (the user, or a timeout); the
                        # first decision stands and this one is dropped.
                        logger.debug("late decision dropped: %s", fact)
        except TurnlogError as error:
            if self._lease_error is not None:
                return  # nothing more can be recorded; on_stop answers the run
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
        log does not. If the save was refused because another process took
        the session over, the session stops instead.
        """
        try:
            recordings = self._store.save(*decide())
        except LeaseLostError as error:
            self._stop_for_lost_lease(error)
            raise
        except Exception:
            self._reload()
            raise
        if before_publish is not None:
            before_publish()
        for recording in recordings:
            event = recording.domain_event
            apply_to_context(self._context, event)
            for out in self._translator.translate(event, event_seq(event)):
                self._publish(RunEvent(self._session_id, out))

    def _publish_transient(self, msg: Any) -> None:
        event = Event(
            self._session_id,
            self._translator.submission_id,
            self._translator.turn_id,
            0,
            msg,
        )
        self._publish(RunEvent(self._session_id, event))

    def _publish(self, item: Any) -> None:
        for subscriber in self._subscribers:
            subscriber.offer(item)

    def _reload(self) -> None:
        """Reads all the session state held here again (the store drops its
        chain head itself): after a failed save, another writer may have appended."""
        fresh = self._store.get(self._session.id)
        if fresh is not None:
            self._session = fresh
        self._turn = load_turn(self._store, self._session)
        self._context = load_context(self._store, self._session)
        self._translator.resume(
            turn_id=str(self._turn.id) if self._turn is not None else None,
            submission_id=self._turn.submission_id if self._turn is not None else None,
            usage_totals=self._session.usage_totals,
            context_epoch=self._session.context_epoch,
        )

    def _stop_for_lost_lease(self, error: LeaseLostError) -> None:
        """Stops the session, now another process's; on_stop answers with ``error``."""
        if self._lease_error is not None:
            return
        self._lease_error = error
        logger.error("session %s stopped: %s", self._session_id, error)
        self.stop()

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
            case PeerInput(text=text, kind=kind):
                if kind not in ("peer", "system"):
                    msg = f"peer input kind must be 'peer' or 'system', not {kind!r}"
                    raise InvalidInputError(msg)
                self._check_open()
                _check_text(text)
                if self._session.running or self._run is not None:
                    return self._queue_input(text, (), kind=kind)
                submission_id = new_submission_id()
                self._start_turn(submission_id, kind, text, ())
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

    def _retire_turn_actor(self) -> None:
        """Stops the kept TurnActor once it has been idle long enough."""
        self._retirement_scheduled = False
        idle = self._idle_turn_actor
        if idle is None:
            return
        waited = time.monotonic() - self._idle_since
        if waited < TURN_ACTOR_IDLE_SECONDS:
            self._schedule_retirement(TURN_ACTOR_IDLE_SECONDS - waited)
            return
        self._idle_turn_actor = None
        with contextlib.suppress(pykka.ActorDeadError):
            idle.tell(CancelTurn())

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
        # The turn actor finishes cancelling its work before this actor is
        # reported stopped, so the runtime never stops the executor or the
        # I/O loop under it.
        for ref in (self._turn_actor, self._idle_turn_actor):
            if ref is not None:
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.tell(CancelTurn())
                ref.stop(block=True, timeout=5)
        stopped: TurnlogError = self._lease_error or SessionClosedError(
            f"session {self._session_id!r} stopped before the run ended"
        )
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
                envelope.reply_to.set_exception(exc_info=(type(stopped), stopped, None))
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(stopped)
        for subscriber in self._subscribers:
            subscriber.close()

    def on_failure(self, *_: object) -> None:
        self.on_stop()


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        msg = f"input text must be a str, not {type(text).__name__}"
        raise InvalidInputError(msg)


__all__ = ["Event", "SessionActor", "SessionServices", "SessionSettings"]
