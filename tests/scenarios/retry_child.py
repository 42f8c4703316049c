"""A turnlog process killed after it recorded an input that carries an id.

Usage: python retry_child.py STORE_URL SESSION_ID

It queues a follow-up with id ``f-1``, then prompts with id ``req-1``;
the model call never returns, and once it has begun (the prompt is in the
log by then) it prints RECORDED and waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys
import threading

from turnlog import Agent, Runtime
from turnlog.domain.model import ModelRequest, ModelResponse
from turnlog.domain.streaming import DeltaSink, discard_deltas


class SilentModel:
    """Says that a call began, then never answers."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        print("RECORDED", flush=True)
        await asyncio.Event().wait()
        raise AssertionError("never answers")


def main() -> None:
    url, session_id = sys.argv[1:3]
    rt = Runtime.open(url)
    session = rt.create_session(Agent("a", model=SilentModel()), session_id=session_id)
    session.follow_up("and then this", input_id="f-1")
    threading.Thread(
        target=lambda: session.prompt("write the report", input_id="req-1"),
        daemon=True,
    ).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
