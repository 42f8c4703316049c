"""The TurnActor: the slow work of one turn, kept off the session's thread.

It starts the turn's model calls on the I/O loop and hands its tool calls
to the ToolExecutor; their results reach the SessionActor as facts
straight from where they complete (one thread hop fewer per result than a
relay through this actor). It owns what is in flight, so an interrupt
(``CancelTurn``) is handled at once: it cancels the model call (which
closes its HTTP stream) and the turn's tool calls. It never writes to the
log and never waits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pykka

from turnlog.actors.contracts import AgentDefinition
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import (
    CallModel,
    CancelTools,
    CancelTurn,
    RunCalls,
    RunTool,
    StepFailed,
    StepSucceeded,
)
from turnlog.domain.errors import ProviderError
from turnlog.domain.model import ModelResponse, check_response


class TurnActor(pykka.ThreadingActor):
    """Drives the model calls and tool calls of one running turn."""

    def __init__(
        self,
        *,
        session: pykka.ActorRef[Any],
        session_id: str,
        turn: int,
        turn_id: str,
        agent: AgentDefinition,
        io_loop: IoLoop,
        tool_executor: pykka.ActorRef[Any],
    ) -> None:
        super().__init__()
        self._session = session
        self._session_id = session_id
        self._turn = turn
        self._turn_id = turn_id
        self._agent = agent
        self._io_loop = io_loop
        self._tools = tool_executor
        self._model_call: concurrent.futures.Future[ModelResponse] | None = None

    def on_receive(self, message: Any) -> Any:
        match message:
            case CallModel(request=request):
                step = request.step
                future = self._io_loop.submit(self._agent.model.respond(request))
                self._model_call = future
                session = self._session
                future.add_done_callback(
                    lambda f: session.tell(self._step_fact(step, f))
                )
            case RunCalls(calls=calls):
                for call in calls:
                    self._tools.tell(
                        RunTool(
                            key=self._turn_id,
                            turn=self._turn,
                            call_id=call["call_id"],
                            tool=self._agent.tools_by_name[call["name"]],
                            arguments=call["arguments"],
                            context={
                                "session_id": self._session_id,
                                "turn_id": self._turn_id,
                                "call_id": call["call_id"],
                            },
                            reply_to=self._session,
                        )
                    )
            case CancelTurn():
                if self._model_call is not None:
                    self._model_call.cancel()
                self._tools.tell(CancelTools(self._turn_id))
                self.stop()
            case _:
                msg = f"TurnActor got an unknown message: {message!r}"
                raise TypeError(msg)

    def _step_fact(
        self, step: int, future: concurrent.futures.Future[ModelResponse]
    ) -> StepSucceeded | StepFailed:
        """The fact a finished model call makes (runs on the I/O thread)."""
        if future.cancelled():
            return StepFailed(self._turn, step, "Cancelled", "model call was cancelled")
        error = future.exception()
        if isinstance(error, asyncio.CancelledError):
            return StepFailed(self._turn, step, "Cancelled", "model call was cancelled")
        if error is not None:
            return StepFailed(self._turn, step, type(error).__name__, str(error))
        try:
            response = check_response(future.result())
        except ProviderError as bad:
            return StepFailed(self._turn, step, "ProviderError", str(bad))
        return StepSucceeded(self._turn, step, response)
