"""A running turn's text deltas, published from the I/O loop (actors.delta_gate).

Each streamed fragment goes from the loop straight to the session's
subscribers, in order, and none after the turn's end: the session closes
the gate before it publishes the end, and a fragment being offered then
is offered first.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from turnlog import Agent, ModelRequest, ModelResponse, Runtime, reply
from turnlog.actors.delta_gate import DeltaGate
from turnlog.actors.subscribers import Subscriber
from turnlog.domain import protocol as p
from turnlog.domain.run import RunEvent, RunFinished
from turnlog.domain.streaming import DeltaSink
from turnlog.domain.translation import EventTranslator
from turnlog.testing import wait_for

WAIT = 10.0


class Session:
    """What the gate reads of a session's state."""

    def __init__(self, *subscribers: Subscriber) -> None:
        self.session_id = "s"
        self.subscribers = list(subscribers)
        self.translator = EventTranslator("s")


def deltas(subscriber: Subscriber) -> list[str]:
    found = []
    for item in subscriber.drain():
        assert isinstance(item, RunEvent)
        assert item.event.transient
        found.append(item.event.msg.delta)
    return found


def test_fragments_reach_the_subscribers_of_the_moment_until_closed() -> None:
    first, second = Subscriber("s"), Subscriber("s")
    session = Session(first)
    gate = DeltaGate(session)
    gate.publish("Hel")
    session.subscribers.append(second)
    gate.publish("lo\ud800")  # not encodable: replaced, as the log would
    gate.close()
    gate.publish("never")
    assert deltas(first) == ["Hel", "lo\ufffd"]
    assert deltas(second) == ["lo\ufffd"]


def test_closing_waits_for_a_fragment_being_offered() -> None:
    entered, release = threading.Event(), threading.Event()

    class Slow(Subscriber):
        def offer(self, item: Any) -> None:
            entered.set()
            assert release.wait(WAIT)
            super().offer(item)

    slow = Slow("s")
    gate = DeltaGate(Session(slow))
    publishing = threading.Thread(target=gate.publish, args=("late",))
    publishing.start()
    assert entered.wait(WAIT)
    closed = threading.Event()
    closing = threading.Thread(target=lambda: (gate.close(), closed.set()))
    closing.start()
    assert not closed.wait(0.1)  # the end is not published while it is offered
    release.set()
    assert closed.wait(WAIT)
    publishing.join(WAIT)
    closing.join(WAIT)
    assert deltas(slow) == ["late"]


class StreamsUntilStopped:
    """Streams a fragment, then waits for more that never comes; sends one
    more once cancelled, as a provider that does not stop at once might."""

    def __init__(self) -> None:
        self.streaming = threading.Event()
        self.last_sent = threading.Event()

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink
    ) -> ModelResponse:
        try:
            on_delta("word ")
            self.streaming.set()
            await asyncio.Event().wait()  # the rest of the stream: never
        except asyncio.CancelledError:
            on_delta("after the end")
            self.last_sent.set()
            raise
        return reply("never")


def test_no_fragment_follows_its_turns_abort() -> None:
    model = StreamsUntilStopped()
    with Runtime.open("memory://") as rt:
        session = rt.create_session(Agent("a", model=model))
        with session.subscribe() as events:
            session.send_input("go")
            assert model.streaming.wait(WAIT)
            session.interrupt()
            _, seen = wait_for(events, lambda m: isinstance(m, RunFinished))
            # The model hands on one more fragment once cancelled, after
            # its turn's abort was published: nobody gets it.
            assert model.last_sent.wait(WAIT)
            seen += events.drain()
    messages = [item.event.msg for item in seen if isinstance(item, RunEvent)]
    aborted = next(i for i, m in enumerate(messages) if isinstance(m, p.TurnAbortedMsg))
    before, after = messages[:aborted], messages[aborted:]
    assert any(isinstance(m, p.AgentMessageDeltaMsg) for m in before)
    assert not any(isinstance(m, p.AgentMessageDeltaMsg) for m in after)
