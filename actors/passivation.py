"""Passivation: what an idle SessionActor hands over when it stops, and to whom.

A session idle for its ``idle_timeout`` stops its actor (and thread) and
gives back its lease; the next use starts a new actor from the log. What is
in the log (the Session, its running Turn, queued input, pending approvals,
session allowances) needs no hand-over. What is only in memory does: the
subscribers, the run a caller may still wait on, the last run's result and
the answers user_prompt hooks gave for queued input. The actor leaves them
with its :class:`SessionHost`, which outlives it, and the next actor takes
them back.

"Idle" (:func:`is_idle`): no run in progress, no input waiting for review,
no background job running;
or a turn that waits for nothing but approval decisions (no model step, no
tool call running). Such a turn may wait for hours; its actor stops too,
and a decision, from whoever gives it, starts a new one that goes on.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Protocol

import pykka

from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import PassivateIfIdle
from turnlog.actors.session_parts import RunState
from turnlog.actors.subscribers import Subscriber
from turnlog.domain.run import RunEvent, RunResult
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.domain.turn_facts import Reviewed


class KeptState:
    """What a passivated session holds in memory only, kept for its next actor."""

    __slots__ = ("closed", "latest_run", "reviewed", "run")

    def __init__(
        self,
        run: RunState | None = None,
        latest_run: RunResult | None = None,
        reviewed: dict[str, Reviewed] | None = None,
        closed: RunEvent | None = None,
    ) -> None:
        self.run = run
        self.latest_run = latest_run
        self.reviewed = reviewed or {}
        self.closed = closed
        """The closed event of a closed session: what a subscriber that
        comes while it is passive is told at once (see Activation.subscribe)."""


class SessionHost(Protocol):
    """What outlives a session's actors: it starts them and lets them stop.

    The runtime implements it (turnlog.actors.activation). ``tell`` is the
    session's address for other actors (the approval broker): it reaches
    whichever actor runs the session then, starting one if none does.
    """

    @property
    def subscribers(self) -> list[Subscriber]:
        """The session's subscribers; every actor of the session shares the list."""
        ...

    def held(self) -> bool:
        """Whether a handle holds the session (one nobody holds passivates
        after ``UNHELD_GRACE``, not its ``idle_timeout``)."""
        ...

    def take_kept(self) -> KeptState | None:
        """What the previous actor left, once; None for a session's first actor."""
        ...

    def passivate(self, inbox_empty: Callable[[], bool], kept: KeptState) -> bool:
        """Lets the calling actor stop, if nothing was sent to it meanwhile.

        Runs on the actor's thread. Returns False (the actor goes on) if
        ``inbox_empty()`` is false or the host is closing; otherwise the
        host keeps ``kept``, gives back the lease and sends later messages
        to a new actor, and the caller must stop.
        """
        ...

    def tell(self, message: Any) -> None:
        """Delivers ``message`` to the session's actor, starting one if needed."""
        ...


def is_idle(session: Session, turn: Turn | None, run: RunState | None) -> bool:
    """Whether a session may passivate: nothing runs that would report back."""
    if session.running_jobs:  # a background job reports to this actor
        return False
    if not session.running:
        return run is None
    if turn is None or turn.step_open or turn.open_calls:
        return False
    waiting = set(turn.pending_approvals.values())
    return bool(waiting) and all(
        call_id in waiting for call_id in turn.unanswered_calls()
    )


UNHELD_GRACE = 1.0
"""Seconds a session nobody holds stays active once idle.

A handle that was dropped cannot call again, so waiting the whole
``idle_timeout`` for it keeps a thread (and memory) for nothing; a short
grace lets a caller that drops and reopens handles per request (the HTTP
service does) find the actor still running.
"""


def _remind(actor: Any) -> None:
    """Asks ``actor`` whether it is idle enough to passivate now."""
    with contextlib.suppress(pykka.ActorDeadError):  # stopped meanwhile
        actor.tell(PassivateIfIdle())


class IdleClock:
    """When a session actor last did anything, and the reminder to look again.

    One reminder at a time: a busy session pays a clock read per message,
    not a timer per message. The timeout is the session's ``idle_timeout``
    while a handle holds it (``held()``), at most ``UNHELD_GRACE`` otherwise.
    """

    def __init__(
        self,
        timeout: float,
        io_loop: IoLoop,
        actor: Any,
        held: Callable[[], bool] = lambda: True,
    ) -> None:
        self._idle_timeout = timeout
        self._held = held
        self._io_loop = io_loop
        self._actor = actor
        self._last = time.monotonic()
        self._reminding = False

    @property
    def _timeout(self) -> float:
        if self._held():
            return self._idle_timeout
        return min(self._idle_timeout, UNHELD_GRACE)

    def _remind(self, delay: float) -> None:
        # No closure over the actor: the timer lives as long as the session
        # is idle, and it is the fewest objects this way.
        self._io_loop.remind_later(delay, _remind, self._actor)

    def touch(self) -> None:
        """Notes activity now, and makes sure a reminder will come."""
        self._last = time.monotonic()
        if not self._reminding:
            self._reminding = True
            self._remind(self._timeout)

    def due(self) -> bool:
        """At a reminder: whether the timeout has passed since the last activity.

        If not, the next reminder is set for when it will have.
        """
        self._reminding = False
        left = self._timeout - (time.monotonic() - self._last)
        if left > 0:
            self._reminding = True
            self._remind(left)
            return False
        return True
