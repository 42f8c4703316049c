"""The service's delta pumps on their own: a task on the loop a watched session.

Each streamed delta reaches ``publish`` on the loop's thread, in order;
a pump runs only while a stream follows the session; a pump that fails
says so in the log and is forgotten, so that a later stream starts anew.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from turnlog import (
    Agent,
    ModelRequest,
    ModelResponse,
    Runtime,
    SessionClosedError,
    reply,
)
from turnlog.domain.streaming import DeltaSink
from turnlog.service.delta_pumps import DeltaPumps

WAIT = 10.0
WORDS = ["one ", "two ", "three "]


class Streamer:
    """Answers every turn with ``WORDS``, a delta each."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink
    ) -> ModelResponse:
        for word in WORDS:
            on_delta(word)
        return reply("".join(WORDS))


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running on a thread of its own, as a service's does."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="service-loop")
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(WAIT)
    loop.close()


@pytest.fixture
def session() -> Iterator[Any]:
    with Runtime.open("memory://") as rt:
        yield rt.create_session(Agent("streams", model=Streamer()))


def pumps_of(session: Any, loop: asyncio.AbstractEventLoop, publish: Any) -> DeltaPumps:
    found = {session.session_id: session}
    return DeltaPumps(found.get, publish, lambda: loop)


def test_each_delta_reaches_publish_on_the_loop_in_order(session, loop) -> None:
    got: list[tuple[str, str]] = []
    all_in = threading.Event()

    def publish(event: Any) -> None:
        got.append((event.msg.delta, threading.current_thread().name))
        if len(got) == len(WORDS):
            all_in.set()

    pumps = pumps_of(session, loop, publish)
    pumps.follow(session.session_id)
    pumps.start(session.session_id)
    pump = pumps.running(session.session_id)
    assert pump is not None
    session.prompt("go", timeout=WAIT)
    assert all_in.wait(WAIT)
    assert got == [(word, "service-loop") for word in WORDS]
    pumps.unfollow(session.session_id)  # the last stream: the pump ends
    pump.done.result(WAIT)
    assert pumps.running(session.session_id) is None


def test_no_pump_runs_while_no_stream_follows(session, loop) -> None:
    pumps = pumps_of(session, loop, lambda event: None)
    pumps.start(session.session_id)
    assert pumps.running(session.session_id) is None
    assert len(pumps) == 0


def test_a_failing_pump_is_logged_and_forgotten(session, loop, caplog) -> None:
    def publish(event: Any) -> None:
        raise RuntimeError("a bug in the feed")

    pumps = pumps_of(session, loop, publish)
    pumps.follow(session.session_id)
    pumps.start(session.session_id)
    pump = pumps.running(session.session_id)
    assert pump is not None
    with caplog.at_level(logging.ERROR, logger="turnlog.service.delta_pumps"):
        session.prompt("go", timeout=WAIT)
        pump.done.result(WAIT)  # it ended, and its error did not escape
    assert "the delta pump of" in caplog.text
    assert "a bug in the feed" in caplog.text
    assert pumps.running(session.session_id) is None
    pump.subscription.drain()
    with pytest.raises(SessionClosedError):  # unsubscribed: no more to read
        pump.subscription.get(timeout=0)
    pumps.start(session.session_id)  # a stream still follows: a pump anew
    again = pumps.running(session.session_id)
    assert again is not None
    assert again is not pump
    pumps.close()
    again.done.result(WAIT)
