"""The TurnActor of a session's running turn.

A TurnActor is a LoopActor (no thread of its own), so starting one for
each turn costs an object, not a thread: nothing is kept between turns.

Every message is a hand-over between threads, so the slot sends none it
can spare: tool calls no post_tool hook has to see go straight to the
ToolExecutor (on the session's thread: it is no actor), and a turn that
ended with nothing in flight is not told to end.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.delta_gate import DeltaGate
from turnlog.actors.loop_actor import LoopActorRef
from turnlog.actors.messages import CancelTurn, RunCalls, UseAgent
from turnlog.actors.session_parts import SessionServices
from turnlog.actors.session_state import SessionState
from turnlog.actors.turn_actor import TurnActor, has_post_tool_hooks, tool_order
from turnlog.domain.turn import Turn
from turnlog.domain.turn_facts import TurnActorFailed


class TurnActorSlot:
    """The TurnActor of one session's running turn, if one runs."""

    def __init__(
        self,
        *,
        session: pykka.ActorRef[Any],
        state: SessionState,
        agent: AgentDefinition,
        services: SessionServices,
    ) -> None:
        self._session = session
        self._state = state
        self._session_id = state.session_id
        self._agent = agent
        self._services = services
        self._post_tool = has_post_tool_hooks(agent)
        self.running: LoopActorRef | None = None
        self._turn = (0, "")
        self._settled = False

    def begin(self, turn: Turn) -> None:
        """Starts the TurnActor of ``turn``."""
        self.end()  # a turn left running (there should be none) is cancelled
        turn_id = turn.id_text
        self._turn = (turn.number, turn_id)
        gate = self._state.delta_gate = DeltaGate(self._state)
        self.running = TurnActor.start(
            session=self._session,
            session_id=self._session_id,
            turn=turn.number,
            turn_id=turn_id,
            agent=self._agent,
            io_loop=self._services.io_loop,
            tool_executor=self._services.tool_executor,
            deltas=gate,
        )

    def use_agent(self, agent: AgentDefinition) -> None:
        """A handoff put ``agent`` in charge: its tools and hooks from now on."""
        self._agent = agent
        self._post_tool = has_post_tool_hooks(agent)
        if self.running is not None:
            self.running.tell(UseAgent(agent))

    def tell(self, message: Any) -> None:
        """Tells the running TurnActor."""
        assert self.running is not None
        self.running.tell(message)

    def run_calls(
        self, calls: tuple[dict[str, Any], ...], run: dict[str, Any] | None = None
    ) -> None:
        """Runs tool calls recorded as started; their outputs come as facts.

        ``run``: what their ToolContexts carry (see ``tool_order``).
        """
        if self._post_tool:
            self.tell(RunCalls(calls, run))
            return
        number, turn_id = self._turn
        try:
            for call in calls:
                self._services.tool_executor.run(
                    tool_order(
                        self._agent,
                        self._session_id,
                        number,
                        turn_id,
                        call,
                        reply_to=self._session,
                        run=run,
                    )
                )
        except pykka.ActorDeadError as gone:  # the runtime is closing
            error = f"tool calls not run: {gone}"
            self._session.tell(TurnActorFailed(number, error))

    def settled(self) -> None:
        """Every fact of the running turn has come back: it ended on its own,
        not by an interrupt or a failure, so ``end`` has nothing to cancel.
        """
        self._settled = True

    def end(self) -> None:
        """Ends the running turn's actor work, cancelling what is in flight."""
        self._state.end_deltas()
        settled, self._settled = self._settled, False
        running, self.running = self.running, None
        if running is None or settled:
            return  # a settled TurnActor holds nothing: it is dropped
        # CancelTurn cancels its coroutines and its tool calls, then stops it.
        with contextlib.suppress(pykka.ActorDeadError):
            running.tell(CancelTurn())

    def forget_dead(self) -> None:
        """Drops the reference to a TurnActor that has died."""
        if self.running is not None and not self.running.is_alive():
            self.running = None

    def stop(self) -> None:
        """Cancels the running TurnActor's work and waits until it stopped.

        The turn actor finishes cancelling its work before the session is
        reported stopped, so the runtime never stops the executor or the
        I/O loop under it.
        """
        self._state.end_deltas()
        running, self.running = self.running, None
        if running is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                running.tell(CancelTurn())
            running.stop(block=True, timeout=5)
