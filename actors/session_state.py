"""What one session is in memory, and the one way it changes: ``record``.

A SessionActor owns one SessionState and hands it to the objects that do
its work (the turn driver). Every change goes through :meth:`SessionState.record`
or, for the turn machine's transitions, :meth:`SessionState.take`: the
aggregates decide (raising, and recording nothing, if the change would
break an invariant), the events are saved in one transaction, and only
then are the matching EventMsgs published. It is the
:class:`~turnlog.domain.turn_facts.TurnState` its TurnMachine reads.
Everything here runs on the session actor's thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.delta_gate import DeltaGate
from turnlog.actors.messages import RunWaiter
from turnlog.actors.revive import load_context, load_conversation, load_turn
from turnlog.actors.session_parts import RunState, SessionServices, SessionSettings
from turnlog.actors.subscribers import Subscriber
from turnlog.domain.chain import event_seq
from turnlog.domain.context import (
    Message,
    apply_to_context,
    conversation_messages,
    holds_whole_conversation,
    messages_of,
)
from turnlog.domain.errors import LeaseLostError, SessionClosedError
from turnlog.domain.model import Item
from turnlog.domain.protocol import (
    Event,
    SessionClosedMsg,
    TurnAbortedMsg,
    TurnCompletedMsg,
)
from turnlog.domain.run import RunEvent, RunResult, SessionEvent
from turnlog.domain.run_context import RunContext
from turnlog.domain.session import Session, SessionClosed
from turnlog.domain.translation import EventTranslator
from turnlog.domain.turn import Turn
from turnlog.domain.turn_facts import Reviewed, Transition

logger = logging.getLogger(__name__)

_ENDS_DELTAS = (TurnCompletedMsg, TurnAbortedMsg, SessionClosedMsg)
"""Messages after which the running turn streams nothing more."""


class SessionState:
    """One session's aggregates, context, runs and subscribers."""

    def __init__(
        self,
        *,
        actor_ref: pykka.ActorRef[Any],
        services: SessionServices,
        agent: AgentDefinition,
        session: Session,
        settings: SessionSettings,
    ) -> None:
        self.actor_ref = actor_ref
        self.store = services.store
        self.services = services
        self.agent = agent
        self.settings = settings
        self.session = session
        self.session_id = session.session_id
        self.turn: Turn | None = load_turn(self.store, session)
        self.context: list[Item] = load_context(self.store, session)
        # The conversation as it happened, read from the log once the
        # context was compacted and asked for (see messages); None until then.
        self.conversation: list[Message] | None = None
        self.translator = EventTranslator(self.session_id)
        self.translator.resume(
            turn_id=str(self.turn.id) if self.turn is not None else None,
            submission_id=self.turn.submission_id if self.turn is not None else None,
            usage_totals=session.usage_totals,
            context_epoch=session.context_epoch,
            parent_session=session.parent_session,
            root_session=session.root_session,
        )
        self.subscribers: list[Subscriber] = []
        # Where the running turn's text deltas are published from the loop
        # (actors.delta_gate); closed before its end is published.
        self.delta_gate: DeltaGate | None = None
        self.run: RunState | None = None
        self.latest_run: RunResult | None = None
        self.close_when_idle = False
        # Callers of close() waiting for the running turn to end first:
        # replaced, never changed in place, so that it is no list until
        # someone waits (a list is an object the collector walks, for every
        # live session, on every full run).
        self.close_waiters: Sequence[concurrent.futures.Future[None]] = ()
        # The SessionClosedMsg event as delivered, for subscribers that come
        # after the close (actors.closing.add_subscriber).
        self.closed_event: Event | None = None
        self.lease_error: LeaseLostError | None = None
        # What the user_prompt hooks answered for queued input accepted in
        # this process, used when it runs; input queued before a restart is
        # reviewed then. Keyed by submission id: (hook contexts, stop).
        self.reviewed: dict[str, Reviewed] = {}
        # After a failed save: whether memory may hold what the log does not
        # (re-reading the log failed too), and the failure of a turn the log
        # may still show running (recording it failed). The turn driver's
        # ``catch_up`` settles both before the session takes more work.
        self.stale = False
        self.unsettled: str | None = None

    def record(
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
            aggregates = decide()
        except Exception:
            self._undo_decision()
            raise
        self._save(aggregates, before_publish)

    def take(
        self,
        transition: Callable[[], Transition],
        before_publish: Callable[[], None] | None = None,
    ) -> Transition:
        """Takes one transition of the turn machine and records its events.

        As :meth:`record`; a transition that records nothing (a stale fact)
        saves nothing. Returns the transition, whose effects are the
        caller's to run now that its events are durable.
        """
        try:
            taken = transition()
        except Exception:
            self._undo_decision()
            raise
        if taken.record:
            self._save(taken.record, before_publish)
        return taken

    def _undo_decision(self) -> None:
        # A decision that raised before it triggered anything (a refused
        # fact, invalid input) left nothing to undo, and no log to re-read.
        turn = self.turn
        if self.session.pending_events or (turn is not None and turn.pending_events):
            self._reload_after_failure()

    def _save(
        self, aggregates: Sequence[Any], before_publish: Callable[[], None] | None
    ) -> None:
        try:
            recordings = self.store.save(*aggregates)
        except LeaseLostError as error:
            self.stop_for_lost_lease(error)
            raise
        except Exception:
            self._reload_after_failure()
            raise
        if before_publish is not None:
            before_publish()
        context, conversation = self.context, self.conversation
        translator, subscribers = self.translator, self.subscribers
        for recording in recordings:
            event: Any = recording.domain_event
            apply_to_context(context, event)
            if conversation is not None:
                conversation.extend(conversation_messages(event))
            if not subscribers and type(event) is not SessionClosed:
                # Nobody to read the messages: the translator keeps only
                # its state (3% of a turn's instructions). A later subscriber
                # is told from then on, as before; replay gives the rest.
                # The close is translated still: its notice is kept for
                # whoever subscribes after it.
                translator.note(event)
                continue
            # A saved event is stamped: its session_seq is its place.
            for out in translator.translate(event, event.session_seq):
                if isinstance(out.msg, _ENDS_DELTAS):
                    self.end_deltas()  # no fragment of the turn after its end
                    if isinstance(out.msg, SessionClosedMsg):
                        self.closed_event = out
                self.publish(RunEvent(self.session_id, out))

    def messages(self) -> list[Message]:
        """The conversation's user and assistant messages, as it happened.

        Until a compaction the model context holds them all; after one
        (or once a hook rewrote input, whose original the context does not
        hold), they are read from the log once and kept up to date here.
        """
        if holds_whole_conversation(self.context):
            return messages_of(self.context)
        if self.conversation is None:
            self.conversation = load_conversation(self.store, self.session)
        return list(self.conversation)

    def publish(self, item: SessionEvent) -> None:
        """Offers ``item`` to every subscriber (none of them can block this)."""
        for subscriber in self.subscribers:
            subscriber.offer(item)

    def end_deltas(self) -> None:
        """Publishes no more text deltas of the running turn (and lets go
        of its gate, which refers back to this state)."""
        gate, self.delta_gate = self.delta_gate, None
        if gate is not None:
            gate.close()

    def reload(self) -> None:
        """Reads all the session state held here again from the log.

        After a failed save another writer may have appended; the store
        drops its cached chain head itself.
        """
        fresh = self.store.get(self.session.id)
        if isinstance(fresh, Session):
            self.session = fresh
        self.turn = load_turn(self.store, self.session)
        self.context = load_context(self.store, self.session)
        self.conversation = None
        self.translator.resume(
            turn_id=str(self.turn.id) if self.turn is not None else None,
            submission_id=self.turn.submission_id if self.turn is not None else None,
            usage_totals=self.session.usage_totals,
            context_epoch=self.session.context_epoch,
            parent_session=self.session.parent_session,
            root_session=self.session.root_session,
        )

    def _reload_after_failure(self) -> None:
        """Re-reads the log after a failed decision or save, if it can.

        A store that cannot be read either (a server gone) leaves memory
        marked stale, to be read again before the session takes more work;
        the caller raises the first failure, not this one.
        """
        try:
            self.reload()
        except Exception:
            self.stale = True
            logger.warning(
                "session %s: could not re-read the log after a failed save",
                self.session_id,
                exc_info=True,
            )
        else:
            self.stale = False

    def stop_for_lost_lease(self, error: LeaseLostError) -> None:
        """Stops the session, now another process's; its end answers ``error``."""
        if self.lease_error is not None:
            return
        self.lease_error = error
        logger.error("session %s stopped: %s", self.session_id, error)
        self.actor_ref.stop(block=False)

    def check_open(self) -> None:
        """Raises SessionClosedError if the session was closed for good."""
        if self.session.closed:
            msg = f"session {self.session_id!r} is closed"
            raise SessionClosedError(msg)

    def check_accepting(self) -> None:
        """Raises SessionClosedError if the session takes no new input:
        closed, or closing once its running turn ends."""
        self.check_open()
        if self.close_when_idle:
            msg = f"session {self.session_id!r} is closing"
            raise SessionClosedError(msg)

    def close_session(self) -> None:
        """Records the session's close (dropping queued input) and ends
        every subscription; answers the callers of close() waiting on it."""
        session = self.session

        def decide() -> list[Any]:
            session.close()
            return [session]

        try:
            self.record(decide)
        except Exception as error:
            self.close_when_idle = False  # nothing was recorded: still open
            for waiter in self.close_waiters:
                if not waiter.done():
                    waiter.set_exception(error)
            self.close_waiters = ()
            raise
        for subscriber in self.subscribers:
            subscriber.close()
        self.subscribers.clear()
        for waiter in self.close_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.close_waiters = ()

    def closed_notice(self) -> RunEvent:
        """The session's SessionClosedMsg event, as it was delivered.

        An actor that did not record the close itself (one revived after
        the close) reads it from the log: the Session's last event.
        """
        if self.closed_event is None:
            session = self.session
            for event in self.store.events(session.id, gt=session.version - 1):
                for out in self.translator.translate(event, event_seq(event)):
                    if isinstance(out.msg, SessionClosedMsg):
                        self.closed_event = out
        if self.closed_event is None:  # never: a closed Session ends so
            self.closed_event = Event(
                self.session_id, None, None, 0, SessionClosedMsg()
            )
        return RunEvent(self.session_id, self.closed_event)

    def deps(self) -> Any:
        """The dependencies of the run in progress: its prompt's, else the session's."""
        run = self.run
        if run is not None and run.deps is not None:
            return run.deps
        return self.settings.deps.value

    def run_context(self, turn_id: str | None) -> RunContext[Any]:
        """The run as instructions and hooks see it now (nothing is copied:
        the shared state is replaced, never changed in place, on update)."""
        return RunContext(
            session_id=self.session_id,
            turn_id=turn_id,
            agent_name=self.agent.name,
            shared_state=MappingProxyType(self.session.shared_state),
            deps=self.deps(),
        )

    def tool_run(self) -> dict[str, Any]:
        """What the ToolContexts of calls started now carry (see tool_order)."""
        return {
            "agent_name": self.agent.name,
            "shared_state": MappingProxyType(self.session.shared_state),
            "deps": self.deps(),
            "session": self.actor_ref,
        }

    def run_waiters(self) -> list[RunWaiter[RunResult]]:
        """The callers waiting on the run in progress."""
        return list(self.run.waiters) if self.run is not None else []
