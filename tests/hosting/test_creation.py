"""CreationPool: blocking calls for coroutines, on a bounded set of threads."""

from __future__ import annotations

import asyncio
import threading

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
