"""What the session handles share: a typed line to one session's actor.

``ActorHandle`` asks and tells the SessionActor through the session's
Activation (turnlog.actors.activation), which starts a passivated session
again; while a handle lives its session keeps its idle_timeout.
``Subscription`` is a handle's view of the session's events.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pykka

from turnlog.actors.activation import Activation
from turnlog.actors.messages import Reply, SessionQuery
from turnlog.actors.subscribers import Subscriber, SubscriptionClosed
from turnlog.domain.errors import RuntimeClosedError, SessionClosedError, TurnlogError
from turnlog.domain.run import RunEvent, SessionEvent

ASK_TIMEOUT: float | None = None
"""How long a call waits for the session actor's answer: as long as it lives.

The actor answers its messages in order and never waits on another actor,
so under load an answer comes late, not never; a stopped actor fails every
ask at once (ActorDeadError, raised here as SessionClosedError). A fixed
limit here would fail calls under a burst on a limit no user set.
"""


class Subscription:
    """Events of one session, from when it subscribed on.

    Iterate it (``for event in sub``, or ``async for``) to read events as
    they come; iteration ends when the session closes, and raises
    SessionFailedError if the session failed instead. ``drain()`` takes
    what is buffered without waiting; ``close()`` unsubscribes.
    """

    def __init__(self, handle: ActorHandle, subscriber: Subscriber) -> None:
        self._handle = handle
        self._subscriber = subscriber

    def get(self, timeout: float | None = None) -> SessionEvent:
        """The next event; raises TimeoutError, or SessionClosedError at the end.

        If the session failed (its actor died), the end raises
        SessionFailedError instead, naming the cause.
        """
        try:
            return self._subscriber.get(timeout)
        except SubscriptionClosed as closed:
            raise SessionClosedError(f"subscription to {closed} ended") from None

    async def get_async(self, timeout: float | None = None) -> SessionEvent:
        """``get`` for asyncio callers: waits on their loop, holding no thread."""
        try:
            return await asyncio.wait_for(self._subscriber.get_async(), timeout)
        except SubscriptionClosed as closed:
            raise SessionClosedError(f"subscription to {closed} ended") from None

    def drain(self) -> list[SessionEvent]:
        """Every buffered event, without waiting."""
        return self._subscriber.drain()

    def close(self) -> None:
        """Stops delivery to this subscription."""
        self._subscriber.close()
        self._handle.unsubscribe(self._subscriber)

    def __iter__(self) -> Iterator[SessionEvent]:
        while True:
            try:
                yield self._subscriber.get()
            except SubscriptionClosed:
                return

    def __aiter__(self) -> AsyncIterator[SessionEvent]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[SessionEvent]:
        while True:
            try:
                yield await self._subscriber.get_async()
            except SubscriptionClosed:
                return

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _let_go(activation: weakref.ref[Activation]) -> None:
    """A handle's finalizer: its activation, if still kept, is held once less."""
    kept = activation()
    if kept is not None:
        kept.let_go()


class ActorHandle:
    """Typed asks and tells to one session's actor, through its activation."""

    def __init__(
        self,
        session_id: str,
        activation: Activation,
        runtime_closed: threading.Event | None = None,
        stopped_by: Callable[[str], TurnlogError | None] | None = None,
    ) -> None:
        self.session_id = session_id
        self._activation = activation
        self.runtime_closed = runtime_closed or threading.Event()
        self._stopped_by = stopped_by
        # While a handle (or a subscription of it) lives, its session keeps
        # its idle_timeout; once none does, it passivates soon after idling.
        activation.hold()
        # The finalizer refers to the activation weakly: a strong reference
        # from the finalizers' registry would keep alive any cycle through
        # this handle (a tool of the session's agent that refers to the
        # session), and the handle with it, after the runtime let go.
        weakref.finalize(self, _let_go, weakref.ref(activation)).atexit = False

    def closed_error(self) -> TurnlogError:
        """What a call that finds the session gone raises: it says why.

        The runtime was closed, the session's lease was lost to another
        process, or the session was closed.
        """
        if self.runtime_closed.is_set():
            return RuntimeClosedError(
                f"session {self.session_id!r}: the runtime was closed"
            )
        stopped_by = self._stopped_by
        reason = None if stopped_by is None else stopped_by(self.session_id)
        return reason or SessionClosedError(f"session {self.session_id!r} is closed")

    def check_runtime_open(self) -> None:
        """Raises RuntimeClosedError once the runtime was closed."""
        if self.runtime_closed.is_set():
            raise self.closed_error()

    def ask(self, message: Any) -> Any:
        try:
            answer = self._activation.ask(message).get(timeout=ASK_TIMEOUT)
        except pykka.ActorDeadError:
            raise self.closed_error() from None
        if isinstance(answer, concurrent.futures.Future):
            # Input that user_prompt hooks review before it is queued: the
            # actor answers once it is recorded, or refused (it raises).
            return answer.result()
        return answer

    def query(self, message: SessionQuery[Reply]) -> Reply:
        """The actor's answer to ``message``, typed by the query."""
        reply: Reply = self.ask(message)
        return reply

    def tell(self, message: Any) -> None:
        try:
            self._activation.send(message)
        except pykka.ActorDeadError:
            raise self.closed_error() from None

    def alive(self) -> bool:
        """Whether the session is open here (running, or passivated)."""
        return not self._activation.ended()

    def subscribe(self, maxsize: int, only_events: bool = False) -> Subscriber:
        accept = (lambda item: isinstance(item, RunEvent)) if only_events else None
        subscriber = Subscriber(self.session_id, maxsize, accept)
        try:
            added = self._activation.subscribe(subscriber)
            if added is not None:
                added.get(timeout=ASK_TIMEOUT)
        except pykka.ActorDeadError:
            raise self.closed_error() from None
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._activation.unsubscribe(subscriber)

    def wait_passivated(self, timeout: float | None) -> bool:
        return self._activation.wait_passivated(timeout)
