"""Reading a subscription with ``async for``: on the reader's loop, no thread held.

Each waiting read took a thread of the loop's default executor, which has
``os.cpu_count() + 4`` of them (at most 32): a few idle subscriptions
left later readers, and the caller's own ``asyncio.to_thread``, waiting
behind them. A waiting reader now holds a future on its own loop, set
from the thread that offers the next item (or closes the subscription).
"""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from turnlog import Agent, Runtime, ScriptedModel, UserInput
from turnlog.actors.subscribers import Subscriber, SubscriptionClosed
from turnlog.domain import protocol as p
from turnlog.domain.errors import TurnlogError
from turnlog.domain.run import RunFinished, RunStarted

WAIT = 10.0
DEFAULT_EXECUTOR_THREADS = min(32, (os.cpu_count() or 1) + 4)


def test_more_waiting_readers_than_the_default_executors_threads() -> None:
    readers = DEFAULT_EXECUTOR_THREADS + 2

    async def main() -> None:
        with Runtime.open("memory://") as rt:
            agent = Agent("a", model=ScriptedModel(["hi"] * readers))
            sessions = [await rt.create_session_async(agent) for _ in range(readers)]
            waiting = asyncio.Semaphore(0)
            finished = [asyncio.Event() for _ in sessions]

            async def read(index: int) -> None:
                with sessions[index].subscribe() as subscription:
                    waiting.release()
                    async for item in subscription:
                        if isinstance(item, RunFinished):
                            finished[index].set()
                            return

            tasks = [asyncio.create_task(read(i)) for i in range(readers)]
            for _ in range(readers):
                await asyncio.wait_for(waiting.acquire(), WAIT)
            # Every reader waits; the last one's session runs: it hears so,
            # and the caller's own work on the default executor runs too.
            await sessions[-1].prompt_async("go")
            await asyncio.wait_for(finished[-1].wait(), WAIT)
            assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), WAIT) == 42
            for session in sessions[:-1]:
                await session.prompt_async("go")
            await asyncio.wait_for(asyncio.gather(*tasks), WAIT)

    asyncio.run(main())


def test_a_waiting_reader_hears_the_close_after_the_buffered_items() -> None:
    subscriber = Subscriber("s")

    async def main() -> list[str]:
        read: list[str] = []

        async def reader() -> None:
            while True:
                try:
                    item = await subscriber.get_async()
                except TurnlogError as failure:
                    read.append(f"failed: {failure}")
                    return
                read.append(type(item).__name__)

        task = asyncio.create_task(reader())
        await asyncio.sleep(0)  # it waits
        started = RunStarted("s", "submission")
        offering = threading.Thread(
            target=lambda: (
                subscriber.offer(started),
                subscriber.close(TurnlogError("gone")),
            )
        )
        offering.start()
        await asyncio.wait_for(task, WAIT)
        offering.join(WAIT)
        return read

    assert asyncio.run(main()) == ["RunStarted", "failed: gone"]


def test_a_cancelled_reader_leaves_the_next_item_to_the_next_reader() -> None:
    subscriber = Subscriber("s")

    async def main() -> None:
        first = asyncio.create_task(subscriber.get_async())
        await asyncio.sleep(0)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert not subscriber._waking  # nothing left to wake for it
        item = RunStarted("s", "submission")
        subscriber.offer(item)  # no reader waits: it stays buffered
        assert await asyncio.wait_for(subscriber.get_async(), WAIT) is item
        subscriber.close()
        with pytest.raises(SubscriptionClosed):
            await subscriber.get_async()

    asyncio.run(main())


def test_agent_handles_waiting_beyond_the_default_executors_threads() -> None:
    readers = DEFAULT_EXECUTOR_THREADS + 2

    async def main() -> None:
        with Runtime.open("memory://") as rt:
            agent = Agent("a", model=ScriptedModel(["hi"] * readers))
            handles = [rt.create_agent(agent) for _ in range(readers)]
            waits = [asyncio.create_task(h.next_event_async()) for h in handles]
            await asyncio.sleep(0)  # each read starts waiting
            handles[-1].submit(UserInput("hello"))
            event = await asyncio.wait_for(waits[-1], WAIT)
            assert isinstance(event.msg, p.TurnStartedMsg)
            for wait in waits[:-1]:
                wait.cancel()
            for handle in handles:
                handle.close()

    asyncio.run(main())
