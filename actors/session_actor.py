"""The SessionActor: the single writer of one session.

Every change to the session goes through here: the actor asks the Session
and Turn aggregates to decide (they raise, recording nothing, if the change
would break an invariant), through the turn's state machine
(domain/turn_machine.py) for everything a turn does, saves the resulting
events in one transaction, and only after the save has returned publishes
the matching EventMsgs to subscribers. Slow work belongs to the
TurnActor, which reports facts back; this actor never waits on another
actor (it only tells), so a session is never stuck behind its own model
or tool calls, nor behind other sessions.

Asks from handles (``Submit``, ``StartPrompt``, ``Query``...) return values
or raise to the caller. Facts told by other actors never raise here: a
fact that cannot be recorded fails the turn instead of the actor.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from typing import Any

from turnlog.actors.actor_pool import PooledActor
from turnlog.actors.agent_in_charge import agent_in_charge_of
from turnlog.actors.background_jobs import (
    JobDone,
    StartJob,
    record_job_done,
    record_job_start,
    start_restarted_jobs,
)
from turnlog.actors.closing import (
    abandon_run,
    add_subscriber,
    close,
    tell_subscribers_if_closed,
)
from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.encodable_facts import encodable_fact
from turnlog.actors.input_review import InputReviews
from turnlog.actors.messages import (
    AbandonRun,
    ActiveRunQuery,
    ChangeRoute,
    ClosedQuery,
    CloseSession,
    ContextQuery,
    FollowUp,
    ForRun,
    LatestRunQuery,
    LeaseLost,
    MessagesQuery,
    PassivateIfIdle,
    PendingApprovalsQuery,
    QueuedInputReviewed,
    QueuedQuery,
    RecordedInputQuery,
    Rewind,
    RunningQuery,
    RunWaiter,
    SessionQuery,
    SharedStateQuery,
    StartPrompt,
    Submit,
    Subscribe,
    Unsubscribe,
    UpdateSharedState,
)
from turnlog.actors.passivation import IdleClock, KeptState, SessionHost, is_idle
from turnlog.actors.retried_inputs import (
    retried_submission,
)
from turnlog.actors.rewinding import rewind_session
from turnlog.actors.session_end import answer_everyone
from turnlog.actors.session_inputs import SessionInputs
from turnlog.actors.session_parts import SessionServices, SessionSettings, check_run
from turnlog.actors.session_state import SessionState
from turnlog.actors.shared_state_writer import record_tool_update
from turnlog.actors.store_faults import caught_up
from turnlog.actors.turn_driver import TurnDriver
from turnlog.actors.turn_slot import TurnActorSlot
from turnlog.domain.errors import (
    InvalidInputError,
    SessionClosedError,
    SessionFailedError,
    TurnlogError,
    UsageError,
)
from turnlog.domain.ids import new_submission_id
from turnlog.domain.protocol import (
    ApprovalResponse,
    Event,
    Interrupt,
    PeerInput,
    Shutdown,
    Steer,
    UserInput,
)
from turnlog.domain.run import QueuedInput
from turnlog.domain.session import Session
from turnlog.domain.text import encodable_text
from turnlog.domain.turn_facts import ApprovalProviderFailed, Decide, ReportedFact

logger = logging.getLogger(__name__)


class SessionActor(PooledActor):
    """Owns one session: its mailbox, and the objects that do its work.

    ``SessionState`` holds the aggregates and records every change;
    ``TurnDriver`` carries the turn's facts to its TurnMachine (which
    decides) and runs the effects, on a ``TurnActorSlot``. With a ``host``
    (actors.passivation) the actor stops once idle for
    ``settings.idle_timeout``, handing what only memory holds to the host,
    and takes it back when the host starts it again.
    """

    def __init__(
        self,
        *,
        services: SessionServices,
        agent: AgentDefinition,
        session: Session,
        settings: SessionSettings,
        host: SessionHost | None = None,
    ) -> None:
        super().__init__()
        agent = agent_in_charge_of(agent, session)
        self._state = SessionState(
            actor_ref=self.actor_ref,
            services=services,
            agent=agent,
            session=session,
            settings=settings,
        )
        self._slot = TurnActorSlot(
            session=self.actor_ref,
            state=self._state,
            agent=agent,
            services=services,
        )
        self._host = host
        self._kept: KeptState | None = None
        self._idle_clock: IdleClock | None = None
        self._passivating = False
        if host is not None:
            self._state.subscribers = host.subscribers
            self._kept = host.take_kept()
            if settings.idle_timeout is not None:
                self._idle_clock = IdleClock(
                    settings.idle_timeout, services.io_loop, self.actor_ref, host.held
                )
        self._turns = TurnDriver(
            self._state, self._slot, host if host is not None else self.actor_ref
        )
        self._receiving: Any = None
        self._input_reviews = InputReviews(
            session.session_id,
            agent.middleware,
            services.io_loop,
            self.actor_ref,
            # Not a lambda over self: actor -> reviews -> lambda -> actor
            # would be a cycle, the whole session left to the collector.
            functools.partial(self._state.run_context, None),
        )
        self._inputs = SessionInputs(self._state, self._turns, self._input_reviews)

    def on_start(self) -> None:
        state, kept = self._state, self._kept
        # Revived after passivating, the broker still holds the requests.
        self._turns.resume(ask_approvals=kept is None)
        start_restarted_jobs(state)
        if kept is not None:
            self._kept = None
            state.latest_run, state.reviewed = kept.latest_run, kept.reviewed
            if kept.run is not None:
                state.run = kept.run  # its callers still wait on it
            if kept.closed is not None:
                state.closed_event = kept.closed.event
        tell_subscribers_if_closed(state)
        if self._idle_clock is not None:
            self._idle_clock.touch()

    # -- dispatch ------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        self._receiving = message  # for on_failure: whom the failure strands
        answer = self._dispatch(message)
        # Not kept once handled: an idle session would hold its last message
        # (a model step's whole response) for as long as it lives.
        self._receiving = None
        return answer

    def _dispatch(self, message: Any) -> Any:
        if self._idle_clock is not None:
            if isinstance(message, PassivateIfIdle):
                self._passivate_if_idle()
                return None
            self._idle_clock.touch()
        if self._turns.behind and not caught_up(
            self._turns, self._input_reviews, message
        ):
            return None
        match message:
            case fact if isinstance(fact, ReportedFact):
                self._handle_fact(fact)
                return None
            case QueuedInputReviewed():
                self._inputs.reviewed(message)
                return None
            case LeaseLost(error=error):
                self._state.stop_for_lost_lease(error)
                return None
            case Decide() if message.decided_by in ("user",):
                self._inputs.decide(message)
                return None
            case Decide() | ApprovalProviderFailed():
                self._handle_fact(message)
                return None
            case Submit(op=op, waiter=waiter):
                return self._submit(op, waiter)
            case FollowUp(text=text, attachments=attachments):
                return self._inputs.queue(text, attachments, input_id=message.input_id)
            case ForRun(run=run, message=inner):
                return self._for_run(run, inner)
            case StartPrompt(text=text, attachments=attachments, waiter=waiter):
                # Told, not asked: the caller waits on ``waiter`` alone, which
                # carries a refusal as well as the run's result.
                try:
                    self._inputs.start_prompt(text, attachments, waiter, message)
                except TurnlogError as error:
                    waiter.set_exception(error)
                return None
            case Subscribe(subscriber=subscriber):
                return add_subscriber(self._state, subscriber)
            case CloseSession(abort=abort, waiter=closed):
                return close(self._state, self._turns, abort, closed)
            case AbandonRun():
                return abandon_run(self._state, self._turns, message)
            case Unsubscribe(subscriber=subscriber):
                self._unsubscribe(subscriber)
                return None
            case StartJob():
                record_job_start(self._state, message)  # a tool's: it waits
                return None
            case JobDone():
                record_job_done(self._state, message)
                return None
            case UpdateSharedState(waiter=waiter) if waiter is not None:
                record_tool_update(self._state, message)  # a tool's: it waits
                return None
            case UpdateSharedState(changes=changes):
                self._state.check_open()
                self._state.record(lambda: self._update_shared_state(changes))
                return dict(self._state.session.shared_state)
            case SessionQuery():
                return self._query(message)
            case Rewind(before_input=before_input, after_turn=after_turn):
                return rewind_session(self._state, before_input, after_turn)
            case ChangeRoute(route=route):
                self._change_route(route)
                return None
            case _:
                msg = f"SessionActor got an unknown message: {message!r}"
                raise TypeError(msg)

    def _change_route(self, route: str) -> None:
        self._state.check_open()
        self._state.agent.provider_for(route)  # UsageError naming the routes
        session = self._state.session

        def change() -> list[Any]:
            session.change_route(route)
            return [session]

        self._state.record(change)

    def _unsubscribe(self, subscriber: Any) -> None:
        if subscriber in self._state.subscribers:
            self._state.subscribers.remove(subscriber)
        subscriber.close()

    def _query(self, query: SessionQuery[Any]) -> Any:
        match query:
            case MessagesQuery():
                return self._state.messages()
            case ContextQuery():
                return [dict(item) for item in self._state.context]
            case SharedStateQuery():
                return dict(self._state.session.shared_state)
            case RunningQuery():
                return self._state.run is not None
            case LatestRunQuery():
                return self._state.latest_run
            case ActiveRunQuery():
                if self._state.run is None:
                    return None
                return (self._state.run.submission_id, self._state.translator.turn_id)
            case QueuedQuery():
                return [
                    QueuedInput(q["submission_id"], q["kind"], q["text"])
                    for q in self._state.session.queued
                ]
            case PendingApprovalsQuery():
                return self._turns.pending_approvals()
            case ClosedQuery():
                return self._state.session.closed
            case RecordedInputQuery(input_id=input_id, kind=kind, text=text):
                return retried_submission(self._state, input_id, kind, text, ())[0]
            case _:
                msg = f"unknown query {query!r}"
                raise UsageError(msg)

    def _handle_fact(self, fact: Any) -> None:
        fact, note = encodable_fact(fact)
        try:
            if note is not None:
                self._turns.warn(getattr(fact, "turn", None), note)
            self._turns.take(fact)
        except TurnlogError as error:
            if self._state.lease_error is not None:
                return  # nothing more can be recorded; the end answers the run
            logger.warning("session %s: %s", self._state.session_id, error)
            self._turns.fail_after_error(error)

    # -- input -----------------------------------------------------------------

    def _submit(self, op: Any, waiter: Any) -> str | concurrent.futures.Future[str]:
        match op:
            case UserInput(text=text, attachments=attachments, input_id=input_id):
                return self._inputs.submit(
                    text, attachments, "prompt", input_id, waiter
                )
            case PeerInput(text=text, kind=kind, input_id=input_id):
                if kind not in ("peer", "system"):
                    msg = f"peer input kind must be 'peer' or 'system', not {kind!r}"
                    raise InvalidInputError(msg)
                return self._inputs.submit(text, (), kind, input_id, None)
            case Steer(text=text, attachments=attachments, input_id=input_id):
                return self._inputs.queue(
                    text, attachments, kind="steer", input_id=input_id
                )
            case Interrupt():
                self._turns.interrupt(op)
                return new_submission_id()
            case ApprovalResponse(request_id=request_id, decision=decision):
                self._inputs.decide(Decide(request_id, decision, "user", op.input_id))
                return new_submission_id()
            case Shutdown():
                close(self._state, self._turns, abort=False, waiter=None)
                return new_submission_id()
            case _:
                msg = f"not an Op: {op!r}"
                raise InvalidInputError(msg)

    def _for_run(
        self, run: str, message: Submit | FollowUp
    ) -> str | concurrent.futures.Future[str]:
        """Input a run handle gives its own run; RunEndedError once it ended."""
        check_run(self._state.run, run, self._state.session_id)
        match message:
            case FollowUp(text=text, attachments=attachments):
                return self._inputs.queue(
                    text, attachments, input_id=message.input_id, for_run=run
                )
            case Submit(
                op=Steer(text=text, attachments=attachments, input_id=input_id)
            ):
                return self._inputs.queue(
                    text, attachments, "steer", input_id=input_id, for_run=run
                )
            case Submit(op=op, waiter=waiter):
                return self._submit(op, waiter)

    def _update_shared_state(self, changes: dict[str, Any]) -> list[Any]:
        self._state.session.update_shared_state(changes)
        return [self._state.session]

    # -- passivation ---------------------------------------------------------------

    def _passivate_if_idle(self) -> None:
        assert self._idle_clock is not None
        assert self._host is not None
        state = self._state
        if not self._idle_clock.due():
            return
        if self._turns.behind and not caught_up(self._turns, self._input_reviews, None):
            self._idle_clock.touch()  # the store still fails: look again later
            return
        if (
            self._input_reviews.busy
            or state.lease_error is not None
            or state.close_when_idle  # close() waits for the turn: keep the wish
            or not is_idle(state.session, state.turn, state.run)
        ):
            return  # the next message sets the clock going again
        closed = state.closed_notice() if state.session.closed else None
        kept = KeptState(state.run, state.latest_run, state.reviewed, closed)
        if self._host.passivate(self.actor_inbox.empty, kept):
            self._passivating = True
            self.actor_ref.stop(block=False)

    def on_stop(self) -> None:
        if self._passivating:
            self._slot.stop()  # a TurnActor waiting on approvals, say
            return
        stopped = f"session {self._state.session_id!r} stopped before the run ended"
        self._end(self._state.lease_error or SessionClosedError(stopped))

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        _traceback: object,
    ) -> None:
        name = getattr(exception_type, "__name__", "error")
        cause = encodable_text(f"{name}: {exception_value}")[0]
        self._turns.record_failure(f"turn failed: the session failed: {cause}")
        failed = f"session {self._state.session_id!r} failed and was stopped: {cause}"
        self._end(SessionFailedError(failed))

    def _end(self, error: TurnlogError) -> None:
        self._slot.stop()
        waiters: list[RunWaiter[Any]] = [
            *self._state.run_waiters(),
            *self._state.close_waiters,
        ]
        if isinstance(self._receiving, StartPrompt):
            waiters.append(self._receiving.waiter)  # the prompt that failed
        answer_everyone(self.actor_inbox, waiters, self._state.subscribers, error)
        self._input_reviews.fail_all(error)


__all__ = ["Event", "SessionActor", "SessionServices", "SessionSettings"]
