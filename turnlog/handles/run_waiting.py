"""How a caller waits for a run, and what an asyncio caller's cancellation does.

The session's actor answers a run's caller once, from its own thread,
through the waiter the caller handed it (actors.messages.RunWaiter).

``prompt_async`` hands it a :class:`LoopWaiter`, answered straight onto
the caller's loop: one ``call_soon_threadsafe`` sets a future of that
loop. A ``concurrent.futures.Future`` bridged onto the loop did the same
with a condition, a re-entrant lock and its five bound methods, two
closures and their cells besides: objects a session waiting on its model
holds, and which the garbage collector walks and promotes while it
waits. ``asyncio.wrap_future`` would also cancel the session's waiter
when the awaiting task is cancelled, and a session whose waiter was
cancelled under it could not answer it any more; the loop's future here
is fed from the waiter and never feeds back. What a cancellation does to
the run is the caller's choice (asyncio's convention by default: it
interrupts the run).

``prompt`` hands it a :class:`ThreadWaiter`, which the blocked thread
waits on with one lock: what a ``concurrent.futures.Future`` does with
that condition, its lock and a lock made for each wait, with six Python
calls fewer a run between the two threads (bench/turn_calls.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _AnsweredOnce(Generic[T]):
    """A run's waiter (actors.messages.RunWaiter): answered once, from the
    session's thread; a subclass hands the answer to its caller."""

    __slots__ = ("_answered",)

    def __init__(self) -> None:
        self._answered = False

    def done(self) -> bool:
        return self._answered

    def set_result(self, result: T) -> None:
        self._answer(result, None)

    def set_exception(self, exception: BaseException) -> None:
        self._answer(None, exception)

    def _answer(self, result: T | None, error: BaseException | None) -> None:
        if self._answered:
            # As a concurrent.futures.Future answered twice says.
            msg = "a run's waiter is answered once"
            raise concurrent.futures.InvalidStateError(msg)
        self._answered = True
        self._hand_over(result, error)

    def _hand_over(self, result: T | None, error: BaseException | None) -> None:
        raise NotImplementedError


class LoopWaiter(_AnsweredOnce[T]):
    """A run's waiter for a caller on an asyncio loop.

    Never cancelled by the session; the loop's future may be cancelled by
    its caller meanwhile, and then the answer is dropped.
    """

    __slots__ = ("_loop", "future")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self.future: asyncio.Future[T] = loop.create_future()
        """What the caller awaits."""

    def _hand_over(self, result: T | None, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed
            self._loop.call_soon_threadsafe(_deliver, self.future, result, error)


class ThreadWaiter(_AnsweredOnce[T]):
    """A run's waiter for a caller blocked on a thread.

    ``result`` blocks until the answer, as ``concurrent.futures.Future.result``
    does, and may be called again.
    """

    __slots__ = ("_error", "_result", "_signal")

    def __init__(self) -> None:
        super().__init__()
        self._result: T | None = None
        self._error: BaseException | None = None
        # Held until the answer: a waiting thread blocks on acquiring it.
        self._signal = threading.Lock()
        self._signal.acquire()

    def _hand_over(self, result: T | None, error: BaseException | None) -> None:
        self._result, self._error = result, error
        self._signal.release()

    def result(self, timeout: float | None = None) -> T:
        """The run's result once answered; raises its error, or TimeoutError
        if ``timeout`` seconds pass first (the run goes on)."""
        if timeout is None:
            answered = self._signal.acquire()
        elif timeout > 0:
            answered = self._signal.acquire(timeout=timeout)
        else:  # as a Future's: no wait at all (the lock would take -1 as none)
            answered = self._signal.acquire(blocking=False)
        if not answered:
            msg = f"the run did not end within {timeout} s"
            raise TimeoutError(msg)
        self._signal.release()  # for whoever asks next
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


def _deliver(
    future: asyncio.Future[T], result: T | None, error: BaseException | None
) -> None:
    """Sets ``future`` on its loop, unless its caller has given up on it."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


def loop_future(source: concurrent.futures.Future[T]) -> asyncio.Future[T]:
    """A future of the running loop that takes ``source``'s outcome (an
    interrupt's ``done``, answered on the session's thread).

    Cancelling it leaves ``source`` alone (unlike ``asyncio.wrap_future``).
    """
    loop = asyncio.get_running_loop()
    target: asyncio.Future[T] = loop.create_future()

    def copy(done: concurrent.futures.Future[T]) -> None:
        if target.done():
            return
        if done.cancelled():
            target.cancel()
        elif (error := done.exception()) is not None:
            target.set_exception(error)
        else:
            target.set_result(done.result())

    def settle(done: concurrent.futures.Future[T]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed
            loop.call_soon_threadsafe(copy, done)

    source.add_done_callback(settle)
    return target


async def await_run(
    waiter: LoopWaiter[T],
    abandon: Callable[[], concurrent.futures.Future[None]] | None,
) -> T:
    """Waits for ``waiter``; on cancellation, ``abandon``s the run first.

    ``abandon`` asks the session to interrupt the run and returns a future
    set once it has (recorded, or found nothing left to interrupt); the
    cancellation reaches the caller after that, so a caller that awaits
    the cancelled task knows the interrupt is in the log. With ``abandon``
    None the run goes on, and only the wait ends.
    """
    try:
        return await waiter.future
    except asyncio.CancelledError:
        if abandon is None or waiter.done():
            raise
        try:
            interrupted: concurrent.futures.Future[None] | None = abandon()
        except Exception:  # noqa: BLE001 - the session is gone: nothing runs for it
            interrupted = None
        if interrupted is not None:
            # A second cancellation ends this wait at once.
            with contextlib.suppress(Exception):
                await loop_future(interrupted)
        raise
