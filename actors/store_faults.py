"""What a session does with a message while a failed save is not caught up.

A save that failed (disk full, I/O error, a PostgreSQL server restarted or
a connection lost) ends the turn that made it; the session's memory is
read again from the log, and if that or recording the failure failed too,
the TurnDriver is ``behind``. Before the session takes its next message it
catches up (``TurnDriver.catch_up``): once the store answers again, memory
and the log agree and the failed turn is recorded as failed, so the next
prompt runs. While the store still fails, the message gets its error.
"""

from __future__ import annotations

import logging
from typing import Any

from turnlog.actors.input_review import InputReviews
from turnlog.actors.messages import (
    ChangeRoute,
    FollowUp,
    LeaseLost,
    QueuedInputReviewed,
    SessionQuery,
    Submit,
    UpdateSharedState,
)
from turnlog.actors.turn_driver import TurnDriver
from turnlog.domain.errors import TurnlogError

logger = logging.getLogger(__name__)


def caught_up(turns: TurnDriver, reviews: InputReviews, message: Any) -> bool:
    """Catches up before ``message``; False if it must not be handled.

    While the store still fails, an ask raises its error, a told prompt or
    update answers its waiter with it, and a fact is dropped (its turn has
    ended); queries and lease news pass.
    """
    if isinstance(message, SessionQuery | LeaseLost):
        return True
    try:
        turns.catch_up()
    except TurnlogError as error:
        waiter = getattr(message, "waiter", None)
        if isinstance(message, QueuedInputReviewed):
            pending = reviews.settle(message)
            waiter = pending.accepted if pending is not None else None
        elif isinstance(message, Submit | FollowUp | UpdateSharedState):
            if waiter is None:
                raise  # asked: the caller gets the error
        elif isinstance(message, ChangeRoute):
            raise
        logger.warning("could not catch up after a failed save: %s", error)
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        return False
    return True
