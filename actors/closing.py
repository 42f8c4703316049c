"""How a session closes, and how a caller that gave up stops its run.

A SessionActor hands these its SessionState and TurnDriver. An idle
session closes at once (``SessionState.close_session``: queued input is
dropped, recorded, then the close). With a turn running the close waits
for the turn: ``close_when_idle`` refuses new input and keeps queued input
from starting, and the end of the run closes the session
(``TurnDriver._finish_run``); with ``abort`` the turn is interrupted first,
which ends the run, and so closes the session, at once. A subscriber that
comes after the close is told so at once and ended, whichever actor of the
session it reaches.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

from turnlog.actors.messages import AbandonRun
from turnlog.actors.session_state import SessionState
from turnlog.actors.turn_driver import TurnDriver
from turnlog.domain.errors import TurnlogError
from turnlog.domain.protocol import Interrupt

logger = logging.getLogger(__name__)


def close(
    state: SessionState,
    turns: TurnDriver,
    abort: bool,
    waiter: concurrent.futures.Future[None] | None,
) -> None:
    """Closes the session now if idle; else once its turn ends, interrupting
    it first if ``abort``. ``waiter`` is set once the close is recorded.

    Raises SessionClosedError if the session is closed already.
    """
    state.check_open()
    if waiter is not None:
        state.close_waiters = [*state.close_waiters, waiter]
    if not state.session.running:
        state.close_session()
        return
    state.close_when_idle = True  # no new input; queued input never runs
    if abort:
        turns.interrupt(Interrupt())


def abandon_run(state: SessionState, turns: TurnDriver, message: AbandonRun) -> None:
    """Interrupts the run its caller gave up on, if its turn still runs;
    then tells the caller (``message.done``)."""
    run = state.run
    try:
        if run is not None and message.waiter in run.waiters and state.session.running:
            turns.interrupt(Interrupt())
    except TurnlogError as error:  # not interruptible now: it ends anyway
        logger.debug("session %s: abandoned run: %s", state.session_id, error)
    finally:
        if not message.done.done():
            message.done.set_result(None)


def add_subscriber(state: SessionState, subscriber: Any) -> None:
    """Adds ``subscriber``; after the close, tells it so at once and ends it."""
    if state.session.closed:
        subscriber.end_with(state.closed_notice())
    else:
        state.subscribers.append(subscriber)


def tell_subscribers_if_closed(state: SessionState) -> None:
    """At an actor's start: if the session was closed by another process
    while passive here, the subscribers that waited meanwhile learn it now."""
    if state.session.closed and state.subscribers:
        notice = state.closed_notice()
        for subscriber in state.subscribers:
            subscriber.end_with(notice)
        state.subscribers.clear()
