"""The TurnActor a session runs its turns on, kept between turns.

Starting a TurnActor starts a thread (~0.2 ms), and turns usually follow
each other at once, so a session keeps its TurnActor after a turn ends and
hands it the next one. One that stays idle for ``TURN_ACTOR_IDLE_SECONDS``
is retired, so an idle session holds no second thread.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.messages import BeginTurn, CancelTurn, EndTurn, RetireTurnActor
from turnlog.actors.session_parts import SessionServices
from turnlog.actors.turn_actor import TurnActor
from turnlog.domain.turn import Turn

TURN_ACTOR_IDLE_SECONDS = 2.0
"""How long a session keeps its TurnActor (a thread) after a turn ends."""


class TurnActorSlot:
    """The running TurnActor of one session, and the idle one it keeps."""

    def __init__(
        self,
        *,
        session: pykka.ActorRef[Any],
        session_id: str,
        agent: AgentDefinition,
        services: SessionServices,
    ) -> None:
        self._session = session
        self._session_id = session_id
        self._agent = agent
        self._services = services
        self.running: pykka.ActorRef[Any] | None = None
        self._idle: pykka.ActorRef[Any] | None = None
        self._idle_since = 0.0
        self._retirement_scheduled = False

    def begin(self, turn: Turn) -> None:
        """Gives ``turn`` to the kept TurnActor, or starts one for it."""
        idle, self._idle = self._idle, None
        if idle is not None and idle.is_alive():
            idle.tell(BeginTurn(turn.number, str(turn.id)))
            self.running = idle
            return
        self.running = TurnActor.start(
            session=self._session,
            session_id=self._session_id,
            turn=turn.number,
            turn_id=str(turn.id),
            agent=self._agent,
            io_loop=self._services.io_loop,
            tool_executor=self._services.tool_executor,
        )

    def tell(self, message: Any) -> None:
        """Tells the running TurnActor."""
        assert self.running is not None
        self.running.tell(message)

    def end(self) -> None:
        """Ends the running turn's actor work; keeps the actor for a while."""
        if self.running is None:
            return
        self.running.tell(EndTurn())
        self._idle, self.running = self.running, None
        self._idle_since = time.monotonic()
        self._schedule_retirement(TURN_ACTOR_IDLE_SECONDS)

    def retire(self) -> None:
        """Stops the kept TurnActor once it has been idle long enough."""
        self._retirement_scheduled = False
        idle = self._idle
        if idle is None:
            return
        waited = time.monotonic() - self._idle_since
        if waited < TURN_ACTOR_IDLE_SECONDS:
            self._schedule_retirement(TURN_ACTOR_IDLE_SECONDS - waited)
            return
        self._idle = None
        with contextlib.suppress(pykka.ActorDeadError):
            idle.tell(CancelTurn())

    def forget_dead(self) -> None:
        """Drops references to TurnActors that have died."""
        if self.running is not None and not self.running.is_alive():
            self.running = None
        if self._idle is not None and not self._idle.is_alive():
            self._idle = None

    def stop(self) -> None:
        """Cancels and stops both actors, waiting for them.

        The turn actor finishes cancelling its work before the session is
        reported stopped, so the runtime never stops the executor or the
        I/O loop under it.
        """
        for ref in (self.running, self._idle):
            if ref is not None:
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.tell(CancelTurn())
                ref.stop(block=True, timeout=5)

    def _schedule_retirement(self, delay: float) -> None:
        """One timer at a time: back-to-back turns must not each wake the loop."""
        if self._retirement_scheduled:
            return
        self._retirement_scheduled = True
        me = self._session

        def remind() -> None:
            with contextlib.suppress(pykka.ActorDeadError):  # the session stopped
                me.tell(RetireTurnActor())

        self._services.io_loop.call_later(delay, remind)
