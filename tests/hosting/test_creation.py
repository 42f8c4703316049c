"""CreationPool: blocking calls for coroutines, on a bounded set of threads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from turnlog import RuntimeClosedError
from turnlog.hosting.creation import CreationPool

WAIT = 20.0


def pool_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("turnlog-create")]


def test_calls_beyond_the_bound_queue_and_every_one_is_answered() -> None:
    pool = CreationPool(max_threads=3)
    release = threading.Event()
    running: list[str] = []
    changed = threading.Condition()

    def call(n: int) -> int:
        with changed:
            running.append(threading.current_thread().name)
            changed.notify_all()
        assert release.wait(WAIT)
        return n * 2

    def three_run() -> bool:
        with changed:
            return changed.wait_for(lambda: len(running) >= 3, WAIT)

    async def scenario() -> list[int]:
        calls = asyncio.gather(*(pool.run(lambda n=n: call(n)) for n in range(10)))
        assert await asyncio.to_thread(three_run)  # the loop is free meanwhile
        assert len(pool_threads()) == 3
        assert len(running) == 3  # the other seven wait for a thread
        release.set()
        return await calls

    try:
        assert asyncio.run(scenario()) == [n * 2 for n in range(10)]
        assert len(set(running)) == 3
    finally:
        pool.close()
    assert pool_threads() == []


def test_what_a_call_raises_reaches_its_caller_and_the_thread_goes_on() -> None:
    pool = CreationPool(max_threads=1)

    def fail() -> None:
        msg = "no"
        raise ValueError(msg)

    async def scenario() -> str:
        with pytest.raises(ValueError, match="no"):
            await pool.run(fail)
        return await pool.run(lambda: "after")

    try:
        assert asyncio.run(scenario()) == "after"
    finally:
        pool.close()


def test_a_closed_pool_refuses_calls() -> None:
    pool = CreationPool()
    pool.close()
    pool.close()  # twice is harmless
    with pytest.raises(RuntimeClosedError):
        asyncio.run(pool.run(lambda: None))
    assert pool_threads() == []


def test_outcomes_that_arrive_while_the_loop_is_busy_wake_it_once() -> None:
    # One thread runs the calls in order: once the sixth runs, the first
    # five have been handed over, all while the loop was held up here.
    pool = CreationPool(max_threads=1)
    sixth_runs = threading.Event()
    wake_ups: list[object] = []

    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()
        call_soon_threadsafe = loop.call_soon_threadsafe

        def counted(callback: Any, *args: Any) -> Any:
            wake_ups.append(callback)
            return call_soon_threadsafe(callback, *args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        calls = [pool.run(lambda n=n: n) for n in range(5)]
        calls.append(pool.run(sixth_runs.set))
        gathered = asyncio.gather(*calls)
        await asyncio.sleep(0)  # each call is queued on the pool
        assert sixth_runs.wait(WAIT)  # the loop is held up meanwhile
        assert len(wake_ups) == 1  # five outcomes, one wake-up so far
        return (await gathered)[:5]

    try:
        assert asyncio.run(scenario()) == [0, 1, 2, 3, 4]
    finally:
        pool.close()
