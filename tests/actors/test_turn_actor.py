"""The TurnActor on the I/O loop: what a cancel leaves behind."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pykka

from turnlog import Agent, ScriptedModel
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import CallModel, CancelTurn
from turnlog.actors.tool_executor import ToolExecutor
from turnlog.actors.turn_actor import TurnActor
from turnlog.domain.model import ModelRequest


class Facts(pykka.ThreadingActor):
    """Stands for the session: keeps what it is told."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[Any] = []

    def on_receive(self, message: Any) -> Any:
        self.told.append(message)


def test_a_model_call_cancelled_before_it_started_leaves_no_coroutine_unawaited() -> (
    None
):
    # The CallModel and the CancelTurn are handled in one step of the loop,
    # so the model call's task is cancelled before its first step: no
    # coroutine made for it may be left never awaited (pytest turns that
    # RuntimeWarning into an error).
    io_loop = IoLoop()
    session = Facts.start()
    executor = ToolExecutor(io_loop)
    try:
        turn = TurnActor.start(
            session=session,
            session_id="s",
            turn=1,
            turn_id="t",
            agent=Agent("a", model=ScriptedModel(["never sent"])),
            io_loop=io_loop,
            tool_executor=executor,
        )
        gate = threading.Event()
        io_loop.call_soon_threadsafe(gate.wait, 10)  # holds the loop
        request = ModelRequest("", (), (), "default", "s", "t", 1)
        turn.tell(CallModel(request))
        turn.tell(CancelTurn())
        gate.set()
        turn.stop(block=True, timeout=10)
        done = threading.Event()
        io_loop.call_soon_threadsafe(done.set)  # the cancelled task's step ran
        assert done.wait(10)
        gc.collect()
        assert session.proxy().told.get(timeout=10) == []
    finally:
        session.stop()
        executor.stop()
        io_loop.close()
