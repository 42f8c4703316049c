"""Actors whose mailbox the I/O loop drains: an actor without a thread.

A pykka actor is a thread. The TurnActor's handlers only start coroutines
on the I/O loop and pass messages on, so giving it a thread of its own
cost a thread start per session, a thread per session waiting on its
model, and a hand-over from its thread to the loop for every model call.
A ``LoopActor`` keeps what makes it an actor (one message at a time, in
the order each sender told them; handlers that never block; an exception
in a handler stops it and calls ``on_failure``) and runs its handlers as
callbacks on the I/O loop's thread.

Its handlers run on the loop, so they must not block it either: no
waiting on futures, no ``ask``; they start coroutines and ``tell``.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

import pykka

from turnlog.actors.io_loop import IoLoop

logger = logging.getLogger("turnlog.actors")


class LoopActor:
    """Base class: override ``on_receive`` (and ``on_failure`` if needed)."""

    def __init__(self, io_loop: IoLoop) -> None:
        self.io_loop = io_loop
        # A flag, not a threading.Event: nothing waits on it, and an Event
        # (a Condition over a Lock) costs more to make than the rest of a
        # TurnActor, which every turn makes anew.
        self.stopped = False

    @property
    def actor_ref(self) -> LoopActorRef:
        """A ref to this actor; a new one each time, never kept: an actor
        holding its own ref would be a cycle, left for the garbage
        collector to free after every turn (issue 24)."""
        return LoopActorRef(self)

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> LoopActorRef:
        """Makes the actor; its ref takes messages at once."""
        actor = cls(*args, **kwargs)
        return actor.actor_ref

    def on_receive(self, message: Any) -> None:
        """Handles one message, on the I/O loop's thread."""
        raise NotImplementedError

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: object,
    ) -> None:
        """A handler raised; the actor has stopped taking messages."""

    def stop(self) -> None:
        """Stops taking messages (from a handler, or from any thread)."""
        self.stopped = True

    def deliver(self, message: Any) -> None:
        # Runs on the loop. Messages told before a stop was handled are
        # dropped, as pykka drops what is left in a stopped actor's inbox.
        if self.stopped:
            return
        try:
            self.on_receive(message)
        except Exception:
            self.stopped = True
            logger.exception("%s failed handling %r", type(self).__name__, message)
            self.on_failure(*sys.exc_info())


class LoopActorRef:
    """How others reach a LoopActor: ``tell``, ``is_alive``, ``stop``."""

    __slots__ = ("_actor",)

    def __init__(self, actor: LoopActor) -> None:
        self._actor = actor

    def tell(self, message: Any) -> None:
        """Queues ``message``; raises pykka.ActorDeadError once stopped."""
        if self._actor.stopped:
            msg = f"{type(self._actor).__name__} has stopped"
            raise pykka.ActorDeadError(msg)
        try:
            self._actor.io_loop.call_soon_threadsafe(self._actor.deliver, message)
        except RuntimeError as closed:  # the loop is closed: the runtime ended
            self._actor.stopped = True
            raise pykka.ActorDeadError(str(closed)) from closed

    def is_alive(self) -> bool:
        return not self._actor.stopped

    def stop(self, *, block: bool = True, timeout: float | None = None) -> None:
        """Stops the actor after the messages told before this one.

        With ``block`` it waits (up to ``timeout``) until they are handled;
        never block from a handler of an actor on the same loop.
        """
        actor = self._actor
        if actor.stopped:
            return
        done = threading.Event()

        def stop_now() -> None:
            actor.stop()
            done.set()

        try:
            actor.io_loop.call_soon_threadsafe(stop_now)
        except RuntimeError:  # the loop is closed already
            actor.stop()
            return
        if block:
            done.wait(timeout)
