"""A run's waiters: answered once from the session's thread.

For an asyncio caller, straight onto the caller's loop, and never onto a
future its caller has given up on; for a caller blocked on a thread, by
waking that thread, or after its wait timed out.

Each case answers from a thread of its own, as the session's actor does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable

import pytest

from turnlog.handles.run_waiting import LoopWaiter, ThreadWaiter


def answer_from_a_thread(answer: Callable[[], None]) -> None:
    """Calls ``answer`` on another thread, as the session's actor would, and
    raises here what it raised there."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            answer()
        except BaseException as error:  # raised again in the test
            raised.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive()
    if raised:
        raise raised[0]


def test_the_result_reaches_the_callers_loop() -> None:
    async def scenario() -> tuple[bool, str]:
        waiter: LoopWaiter[str] = LoopWaiter(asyncio.get_running_loop())
        answer_from_a_thread(lambda: waiter.set_result("done"))
        return waiter.done(), await asyncio.wait_for(waiter.future, 10)

    assert asyncio.run(scenario()) == (True, "done")


def test_an_error_reaches_the_callers_loop_as_raised() -> None:
    async def scenario() -> None:
        waiter: LoopWaiter[str] = LoopWaiter(asyncio.get_running_loop())
        answer_from_a_thread(lambda: waiter.set_exception(KeyError("gone")))
        await asyncio.wait_for(waiter.future, 10)

    with pytest.raises(KeyError, match="gone"):
        asyncio.run(scenario())


def test_a_waiter_is_answered_once() -> None:
    async def scenario() -> str:
        waiter: LoopWaiter[str] = LoopWaiter(asyncio.get_running_loop())
        waiter.set_result("first")
        with pytest.raises(concurrent.futures.InvalidStateError):
            waiter.set_result("second")
        with pytest.raises(concurrent.futures.InvalidStateError):
            waiter.set_exception(RuntimeError("late"))
        return await asyncio.wait_for(waiter.future, 10)

    assert asyncio.run(scenario()) == "first"


def test_an_answer_after_the_caller_gave_up_is_dropped() -> None:
    async def scenario() -> list[dict[str, object]]:
        loop = asyncio.get_running_loop()
        problems: list[dict[str, object]] = []
        loop.set_exception_handler(lambda _loop, context: problems.append(context))
        waiter: LoopWaiter[str] = LoopWaiter(loop)
        waiter.future.cancel()  # the awaiting task was cancelled
        answer_from_a_thread(lambda: waiter.set_result("too late"))
        # The loop runs its callbacks in the order they came: once this
        # one has run, so has the answer's, queued before it.
        after_the_answer = loop.create_future()
        loop.call_soon(after_the_answer.set_result, None)
        await asyncio.wait_for(after_the_answer, 10)
        return problems

    # Setting a cancelled future would raise InvalidStateError in the
    # callback, which the loop reports to its exception handler.
    assert asyncio.run(scenario()) == []


def test_an_answer_after_the_callers_loop_closed_is_dropped() -> None:
    loop = asyncio.new_event_loop()
    waiter: LoopWaiter[str] = LoopWaiter(loop)
    loop.close()

    answer_from_a_thread(lambda: waiter.set_result("nobody waits"))

    assert waiter.done()


def answer_later(answer: Callable[[], None]) -> threading.Thread:
    """Starts ``answer`` on another thread, which may run before or while
    this one waits (the caller joins the thread)."""

    def run() -> None:
        answer()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_blocked_thread_gets_the_result_and_may_ask_again() -> None:
    waiter: ThreadWaiter[str] = ThreadWaiter()
    assert not waiter.done()
    answering = answer_later(lambda: waiter.set_result("done"))
    assert waiter.result(timeout=10) == "done"
    answering.join(timeout=10)
    assert waiter.done()
    assert waiter.result(timeout=0) == "done"  # asked again, at once


def test_a_blocked_thread_gets_the_error_raised() -> None:
    waiter: ThreadWaiter[str] = ThreadWaiter()
    answering = answer_later(lambda: waiter.set_exception(KeyError("gone")))
    with pytest.raises(KeyError, match="gone"):
        waiter.result(timeout=10)
    answering.join(timeout=10)
    with pytest.raises(KeyError, match="gone"):
        waiter.result()


def test_a_thread_waiter_is_answered_once() -> None:
    waiter: ThreadWaiter[str] = ThreadWaiter()
    answer_from_a_thread(lambda: waiter.set_result("first"))
    with pytest.raises(concurrent.futures.InvalidStateError):
        waiter.set_result("second")
    with pytest.raises(concurrent.futures.InvalidStateError):
        waiter.set_exception(RuntimeError("late"))
    assert waiter.result(timeout=10) == "first"


def test_a_wait_that_times_out_leaves_the_answer_to_come() -> None:
    waiter: ThreadWaiter[str] = ThreadWaiter()
    with pytest.raises(TimeoutError):
        waiter.result(timeout=0.01)
    assert not waiter.done()
    answer_from_a_thread(lambda: waiter.set_result("late"))
    assert waiter.result(timeout=10) == "late"


@pytest.mark.parametrize("timeout", [0, -1, -2.5])
def test_a_wait_of_no_time_does_not_wait(timeout: float) -> None:
    # As concurrent.futures.Future.result: zero or less is no wait at all
    # (the lock underneath would take -1 as "forever").
    waiter: ThreadWaiter[str] = ThreadWaiter()
    with pytest.raises(TimeoutError):
        waiter.result(timeout=timeout)
    waiter.set_result("now")
    assert waiter.result(timeout=timeout) == "now"
