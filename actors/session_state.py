"""What one session is in memory, and the one way it changes: ``record``.

A SessionActor owns one SessionState and hands it to the objects that do
its work (the turn flow, the approvals). Every change goes through
:meth:`SessionState.record`: the aggregates decide (raising, and recording
nothing, if the change would break an invariant), the events are saved in
one transaction, and only then are the matching EventMsgs published.
Everything here runs on the session actor's thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.revive import load_context, load_turn
from turnlog.actors.session_parts import RunState, SessionServices, SessionSettings
from turnlog.actors.subscribers import Subscriber
from turnlog.domain.chain import event_seq
from turnlog.domain.context import apply_to_context
from turnlog.domain.errors import LeaseLostError, SessionClosedError
from turnlog.domain.model import Item
from turnlog.domain.protocol import Event
from turnlog.domain.run import RunEvent, RunResult, SessionEvent
from turnlog.domain.session import Session
from turnlog.domain.translation import EventTranslator
from turnlog.domain.turn import Turn

logger = logging.getLogger(__name__)

Reviewed = tuple[tuple[tuple[str, str], ...], str | None]
"""What user_prompt hooks answered for input: (hook contexts, stop)."""


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
        self.translator = EventTranslator(self.session_id)
        self.translator.resume(
            turn_id=str(self.turn.id) if self.turn is not None else None,
            submission_id=self.turn.submission_id if self.turn is not None else None,
            usage_totals=session.usage_totals,
            context_epoch=session.context_epoch,
        )
        self.subscribers: list[Subscriber] = []
        self.run: RunState | None = None
        self.latest_run: RunResult | None = None
        self.close_when_idle = False
        self.lease_error: LeaseLostError | None = None
        # What the user_prompt hooks answered for queued input accepted in
        # this process, used when it runs; input queued before a restart is
        # reviewed then. Keyed by submission id: (hook contexts, stop).
        self.reviewed: dict[str, Reviewed] = {}

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
            recordings = self.store.save(*decide())
        except LeaseLostError as error:
            self.stop_for_lost_lease(error)
            raise
        except Exception:
            self.reload()
            raise
        if before_publish is not None:
            before_publish()
        for recording in recordings:
            event = recording.domain_event
            apply_to_context(self.context, event)
            for out in self.translator.translate(event, event_seq(event)):
                self.publish(RunEvent(self.session_id, out))

    def publish(self, item: SessionEvent) -> None:
        """Offers ``item`` to every subscriber (none of them can block this)."""
        for subscriber in self.subscribers:
            subscriber.offer(item)

    def publish_transient(self, msg: Any) -> None:
        """Publishes an EventMsg that is never recorded (a text delta)."""
        event = Event(
            self.session_id,
            self.translator.submission_id,
            self.translator.turn_id,
            0,
            msg,
        )
        self.publish(RunEvent(self.session_id, event))

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
        self.translator.resume(
            turn_id=str(self.turn.id) if self.turn is not None else None,
            submission_id=self.turn.submission_id if self.turn is not None else None,
            usage_totals=self.session.usage_totals,
            context_epoch=self.session.context_epoch,
        )

    def stop_for_lost_lease(self, error: LeaseLostError) -> None:
        """Stops the session, now another process's; its end answers ``error``."""
        if self.lease_error is not None:
            return
        self.lease_error = error
        logger.error("session %s stopped: %s", self.session_id, error)
        self.actor_ref.stop(block=False)

    def current_turn(self, number: int) -> Turn | None:
        """The running turn if it is turn ``number``; None for a stale fact."""
        turn = self.turn
        if turn is None or turn.number != number or not self.session.running:
            return None  # a fact from a turn that already ended
        return turn

    def check_open(self) -> None:
        """Raises SessionClosedError if the session was closed for good."""
        if self.session.closed:
            msg = f"session {self.session_id!r} is closed"
            raise SessionClosedError(msg)

    def close_session(self) -> None:
        """Records the session's close and ends every subscription."""
        session = self.session

        def decide() -> list[Any]:
            session.close()
            return [session]

        self.record(decide)
        for subscriber in self.subscribers:
            subscriber.close()

    def run_waiters(self) -> list[concurrent.futures.Future[RunResult]]:
        """The callers waiting on the run in progress."""
        return list(self.run.waiters) if self.run is not None else []
