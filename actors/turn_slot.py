"""The TurnActor a session runs its turns on, kept between turns.

Starting a TurnActor starts a thread (~0.2 ms), and turns usually follow
each other at once, so a session keeps its TurnActor after a turn ends and
hands it the next one. One that stays idle for ``TURN_ACTOR_IDLE_SECONDS``
is retired, so an idle session holds no second thread.

Every message is a hand-over between threads, so the slot sends none it
can spare: a kept TurnActor learns its next turn with that turn's first
order, a turn that ended with nothing in flight is not told to end, and
tool calls no post_tool hook has to see go straight to the ToolExecutor.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.messages import (
    BeginTurn,
    CancelTurn,
    EndTurn,
    RetireTurnActor,
    RunCalls,
    TurnActorFailed,
)
from turnlog.actors.session_parts import SessionServices
from turnlog.actors.turn_actor import TurnActor, has_post_tool_hooks, tool_order
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
        self._post_tool = has_post_tool_hooks(agent)
        self.running: pykka.ActorRef[Any] | None = None
        self._turn = (0, "")
        self._begin: BeginTurn | None = None  # not told yet: no order came
        self._settled = False
        self._idle: pykka.ActorRef[Any] | None = None
        self._idle_since = 0.0
        self._retirement_scheduled = False

    def begin(self, turn: Turn) -> None:
        """Gives ``turn`` to the kept TurnActor, or starts one for it."""
        self._turn = (turn.number, str(turn.id))
        idle, self._idle = self._idle, None
        if idle is not None and idle.is_alive():
            self._begin = BeginTurn(turn.number, str(turn.id))
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
        begin, self._begin = self._begin, None
        if begin is not None:
            message = BeginTurn(begin.turn, begin.turn_id, then=message)
        self.running.tell(message)

    def run_calls(self, calls: tuple[dict[str, Any], ...]) -> None:
        """Runs tool calls recorded as started; their outputs come as facts."""
        if self._post_tool:
            self.tell(RunCalls(calls))
            return
        number, turn_id = self._turn
        try:
            for call in calls:
                self._services.tool_executor.tell(
                    tool_order(
                        self._agent,
                        self._session_id,
                        number,
                        turn_id,
                        call,
                        reply_to=self._session,
                    )
                )
        except pykka.ActorDeadError as gone:  # the runtime is closing
            error = f"the tool executor has stopped: {gone}"
            self._session.tell(TurnActorFailed(number, error))

    def settled(self) -> None:
        """Every fact of the running turn has come back: it ended on its own,
        not by an interrupt or a failure, so ``end`` has nothing to cancel.
        """
        self._settled = True

    def end(self) -> None:
        """Ends the running turn's actor work; keeps the actor for a while."""
        settled, self._settled = self._settled, False
        if self.running is None:
            return
        if not settled:
            # Carries a BeginTurn not told yet, so the actor cancels the
            # tool calls of this turn, which it may never have heard of.
            self.tell(EndTurn())
        self._begin = None
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
