"""Activations: an open session's actor, started on use and stopped when idle.

An :class:`Activation` is what a runtime keeps for each session it opened,
and what the session's handles talk through (Orleans' word for an entity
living in memory). While the session is active it holds the session's
SessionActor; once the actor has been idle for ``idle_timeout`` it
passivates: the actor stops, the lease is given back, and
the activation keeps only what memory alone held (actors.passivation). The
next message, from a handle or from the approval broker, starts a new
actor from the log under a new lease first. So threads follow the active
sessions, not the open ones.

Every message to the session is put in its actor's inbox under the
activation's lock, and an actor passivates only under that lock with an
empty inbox: a message is never left in the inbox of an actor that stops,
and the session never has two actors. Nobody waits for an actor while
holding the lock; an ask takes its answer after letting go.

Why one actor per active session, and not many sessions hosted by a
fixed pool of actors: measured, in the README's design note ("Embedding
it") and bench/RESULTS.md ("Idle sessions passivate").
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.messages import PassivateIfIdle, Subscribe, Unsubscribe
from turnlog.actors.passivation import KeptState
from turnlog.actors.session_parts import SessionSettings
from turnlog.actors.subscribers import Subscriber
from turnlog.domain.errors import SessionClosedError, TurnlogError

logger = logging.getLogger(__name__)

Starter = Callable[["Activation"], "pykka.ActorRef[Any]"]
"""Starts a SessionActor hosted by the activation it is given."""


class Activation:
    """One open session: its actor while active, what it keeps while passive.

    Args:
        session_id: The session.
        agent: The agent it runs (kept to start its next actor).
        settings: Its run settings, ``idle_timeout`` included.
        revive: Starts the session's next actor (taking its lease first);
            raises SessionBusyError if another process holds the session.
        release: Gives back the session's lease.
    """

    def __init__(
        self,
        session_id: str,
        agent: AgentDefinition,
        settings: SessionSettings,
        *,
        revive: Starter,
        release: Callable[[str], None],
        passivated: Callable[[], None] = lambda: None,
    ) -> None:
        self.session_id = session_id
        self.agent = agent
        self.digest = agent.digest()
        self.settings = settings
        self._revive = revive
        self._release = release
        self._passivated = passivated
        self._lock = threading.Lock()
        # Notified under the lock whenever the session passivates or closes;
        # made by the first wait (few sessions are ever waited on, and a
        # Condition is four objects the garbage collector walks meanwhile).
        self._passive: threading.Condition | None = None
        self._ref: pykka.ActorRef[Any] | None = None
        # The last actor that passivated, until it has stopped; weak, so a
        # passive session keeps no actor in memory.
        self._stopping: weakref.ref[pykka.ActorRef[Any]] | None = None
        self._kept: KeptState | None = None
        self._closing = False
        self._subscribers: list[Subscriber] = []
        # How many handles hold the session (see ``hold``). Its own lock, and
        # never the activation's: a handle is let go of by the garbage
        # collector, which may run on any thread at any allocation.
        self._holders = 0
        self._holders_lock = threading.RLock()

    # -- the host its actors see (actors.passivation.SessionHost) ----------------

    @property
    def subscribers(self) -> list[Subscriber]:
        """The session's subscribers, shared by every actor it runs on."""
        return self._subscribers

    def take_kept(self) -> KeptState | None:
        """What the last actor left (its next one takes it, once)."""
        kept, self._kept = self._kept, None
        return kept

    def passivate(self, inbox_empty: Callable[[], bool], kept: KeptState) -> bool:
        """Lets the calling actor stop if its inbox is empty; see SessionHost."""
        with self._lock:
            if self._closing or self._ref is None or not inbox_empty():
                return False
            try:
                self._release(self.session_id)
            except Exception:  # a store that fails now: stay active until next used
                logger.warning(
                    "session %s could not give back its lease; it stays active",
                    self.session_id,
                    exc_info=True,
                )
                return False
            self._kept = kept
            self._stopping, self._ref = weakref.ref(self._ref), None
            self._wake_waiters()
        # Outside this activation's lock: the runtime's waiters take its own.
        self._passivated()
        return True

    def held(self) -> bool:
        """Whether a handle holds the session (else it passivates sooner)."""
        return self._holders > 0

    def tell(self, message: Any) -> None:
        """Delivers a message from another actor, reviving the session if needed.

        Raises pykka.ActorDeadError if the session cannot take it (ended,
        or another process holds it now): the sender drops it, as it drops
        messages to any stopped actor.
        """
        try:
            self.send(message)
        except pykka.ActorDeadError:
            raise
        except Exception as error:  # the sender is another actor: never crash it
            logger.warning(
                "session %s dropped %s: %s",
                self.session_id,
                type(message).__name__,
                error,
                exc_info=not isinstance(error, TurnlogError),
            )
            raise pykka.ActorDeadError(str(error)) from None

    # -- what handles use ---------------------------------------------------------

    def hold(self) -> None:
        """A handle of the session was made: it may call the session again.

        Each ``hold`` needs one ``let_go``, when the handle is dropped.
        """
        with self._holders_lock:
            self._holders += 1

    def let_go(self) -> None:
        """A handle of the session was dropped.

        When the last one goes, nobody can call the session but the log's
        other parties (an approval decision, say): an idle actor need not
        wait for its ``idle_timeout``, and is reminded to look now (a
        reminder needs no lock: one that finds the actor stopped is dropped).
        """
        with self._holders_lock:
            self._holders -= 1
            if self._holders > 0:
                return
        ref = self._ref
        if ref is not None and self.settings.idle_timeout is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(PassivateIfIdle())

    def reserve(self) -> None:
        """Holds the session for the first actor that :meth:`start` starts.

        Called by the thread that then calls ``start``, before anyone else
        can reach the activation: whoever messages the session meanwhile
        waits for that actor (or for the failure that ended the session),
        and never starts one of its own.
        """
        self._lock.acquire()

    def start(self, starter: Starter) -> None:
        """Starts the session's first actor with ``starter`` (after ``reserve``).

        If ``starter`` raises, the session has ended here (see ``ended``).
        """
        try:
            self._ref = starter(self)
        except BaseException:
            self._closing = True
            self._wake_waiters()
            raise
        finally:
            self._lock.release()

    def send(self, message: Any) -> None:
        """Tells the session's actor, reviving the session if it passivated."""
        with self._lock:
            self._actor().tell(message)

    def ask(self, message: Any) -> pykka.Future[Any]:
        """Asks the session's actor; the answer is taken from the future."""
        with self._lock:
            return self._actor().ask(message, block=False)

    def subscribe(self, subscriber: Subscriber) -> pykka.Future[Any] | None:
        """Adds ``subscriber``; a passivated session is not woken for it.

        A closed one tells it so at once and ends it.
        """
        with self._lock:
            if self._ref is None and not self._closing:
                closed = self._kept.closed if self._kept is not None else None
                if closed is not None:
                    subscriber.end_with(closed)
                else:
                    self._subscribers.append(subscriber)
                return None
            return self._actor().ask(Subscribe(subscriber), block=False)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Removes ``subscriber``; a passivated session is not woken for it."""
        with self._lock:
            if self._ref is None:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)
                return
            with contextlib.suppress(pykka.ActorDeadError):
                self._ref.tell(Unsubscribe(subscriber))

    def wait_passivated(self, timeout: float | None = None) -> bool:
        """Waits until the session is passive: lease given back, actor stopped.

        True at once if it is passive now. False if ``timeout`` passed
        first, or the session ended here: it will not passivate (a close
        wakes the waiters; an actor that failed or lost its lease does not,
        so a wait that began before that ends with its timeout). The next
        message to the session starts it again.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if self._passive is None:
                self._passive = threading.Condition(self._lock)
            if not self._passive.wait_for(
                lambda: self._ref is None or self.ended(), timeout
            ):
                return False
            if self.ended():
                return False
            stopping = self._stopping() if self._stopping is not None else None
        if stopping is None:  # collected: its actor is gone
            return True
        # The actor stops just after it let go of the session.
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return stopping.actor_stopped.wait(left)

    def ended(self) -> bool:
        """Whether the session is over here: closed with the runtime, or its
        actor stopped for a reason other than passivating (a failure, a
        lost lease)."""
        ref = self._ref
        return self._closing or (ref is not None and not ref.is_alive())

    def live(self) -> bool:
        """Whether an actor runs the session now."""
        ref = self._ref
        return ref is not None and ref.is_alive()

    def tell_if_live(self, message: Any) -> None:
        """Tells the running actor, if any; a passivated session is left be."""
        with self._lock:
            if self._ref is not None:
                with contextlib.suppress(pykka.ActorDeadError):
                    self._ref.tell(message)

    def close(self) -> None:
        """Stops the session's actor (the runtime closes); no revival after."""
        with self._lock:
            self._closing = True
            self._wake_waiters()
            stopping = self._stopping() if self._stopping is not None else None
            refs = [ref for ref in (self._ref, stopping) if ref is not None]
            kept, self._kept = self._kept, None
            active = self._ref is not None
        for ref in refs:
            if ref.is_alive():
                ref.stop(block=True, timeout=10)
        if active:
            return  # the actor's own end answered everyone
        stopped = f"session {self.session_id!r} stopped before the run ended"
        if kept is not None and kept.run is not None:
            for waiter in kept.run.waiters:
                if not waiter.done():
                    waiter.set_exception(SessionClosedError(stopped))
        for subscriber in self._subscribers:
            subscriber.close()

    def _wake_waiters(self) -> None:
        """Wakes those in ``wait_passivated`` (lock held)."""
        if self._passive is not None:
            self._passive.notify_all()

    def _actor(self) -> pykka.ActorRef[Any]:
        """The running actor, started if the session passivated (lock held)."""
        if self._closing:
            msg = f"session {self.session_id!r} is closed here"
            raise pykka.ActorDeadError(msg)
        if self._ref is None:
            self._ref = self._revive(self)
        return self._ref
