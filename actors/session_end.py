"""How a stopping SessionActor answers everyone still waiting on it.

A session actor stops in order (``Runtime.close``, a closed session) or
because a handler raised (pykka then calls ``on_failure``). Either way no
caller may be left waiting: the prompts of the run in progress, prompts and
asks still in the inbox (pykka drops told messages unanswered), and every
subscriber. They get the same error, so a crash is never mistaken for an
orderly close.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable
from typing import Any

from turnlog.actors.messages import (
    AbandonRun,
    RunWaiter,
    StartPrompt,
    UpdateSharedState,
)
from turnlog.actors.subscribers import Subscriber
from turnlog.domain.errors import SessionFailedError, TurnlogError


def answer_everyone(
    inbox: Any,  # its get_nowait raises queue.Empty when it is empty
    waiters: Iterable[RunWaiter[Any]],
    subscribers: Iterable[Subscriber],
    error: TurnlogError,
) -> None:
    """Fails every waiter and every message left in ``inbox`` with ``error``.

    Subscribers are closed; after a failure (a SessionFailedError) they
    raise it to their readers instead of ending quietly.
    """
    pending = list(waiters)
    while True:
        try:
            envelope = inbox.get_nowait()
        except queue.Empty:
            break
        message = envelope.message
        if isinstance(message, StartPrompt):
            pending.append(message.waiter)
        if isinstance(message, AbandonRun):
            pending.append(message.done)  # a cancelled caller waits on it
        if isinstance(message, UpdateSharedState) and message.waiter is not None:
            pending.append(message.waiter)  # a tool waits on it
        if envelope.reply_to is not None:
            envelope.reply_to.set_exception(exc_info=(type(error), _copy(error), None))
    for waiter in pending:
        if not waiter.done():
            waiter.set_exception(_copy(error))
    failure = error if isinstance(error, SessionFailedError) else None
    for subscriber in subscribers:
        subscriber.close(failure)


def _copy(error: TurnlogError) -> TurnlogError:
    # Each waiter raises in its own thread: one shared instance would carry
    # every thread's traceback.
    return type(error)(*error.args)
