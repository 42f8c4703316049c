"""How an asyncio caller waits for a run, and what its cancellation does.

``prompt_async`` hands the session a ``concurrent.futures.Future`` that the
session's actor resolves when the run ends. ``asyncio.wrap_future`` would
cancel that future when the awaiting task is cancelled, and a session
whose waiter was cancelled under it could not answer it any more; so the
loop gets a future of its own here, fed from the waiter and never
feeding back. What a cancellation does to the run is the caller's choice
(asyncio's convention by default: it interrupts the run).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def loop_future(source: concurrent.futures.Future[T]) -> asyncio.Future[T]:
    """A future of the running loop that takes ``source``'s outcome.

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
    waiter: concurrent.futures.Future[T],
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
        return await loop_future(waiter)
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
