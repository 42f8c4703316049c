"""One asyncio loop on its own thread, for every coroutine the actors start.

Actor handlers must never block, so model calls and async tools run here
and report back by telling an actor. pykka futures are never awaited on
this loop (their ``__await__`` blocks it); results cross through
``concurrent.futures.Future`` callbacks instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class IoLoop:
    """A running event loop on a dedicated daemon thread."""

    def __init__(self, name: str = "turnlog-io") -> None:
        self._loop = asyncio.new_event_loop()
        # The context remind_later's callbacks run in: one for all of this
        # loop's, which run one at a time on its thread and never enter
        # one another, so it is never entered twice at once (a context
        # shared with another loop's thread could be).
        self._bare_context = contextvars.Context()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedules ``coroutine``; cancelling the future cancels the task."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def call_soon_threadsafe(self, callback: Callable[..., None], *args: Any) -> None:
        """Runs ``callback(*args)`` on the loop soon, in the order told.

        Raises RuntimeError once the loop is closed.
        """
        self._loop.call_soon_threadsafe(callback, *args)

    def create_task(self, coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Starts ``coroutine``; only from code running on the loop itself."""
        return self._loop.create_task(coroutine)

    def remind_later(
        self, delay: float, callback: Callable[[Any], None], argument: Any
    ) -> None:
        """Runs ``callback(argument)`` on the loop after ``delay`` seconds,
        from any thread; it cannot be cancelled.

        For a timer that lives as long as a session is idle: it is the
        loop's TimerHandle and its arguments and nothing else, where
        :meth:`call_later` keeps a handle to cancel, a closure and a copy
        of the caller's context variables besides (issue 24: the objects
        each live session keeps lengthen the collector's full pauses). The
        callback runs in a context of its own, empty, so it must not
        depend on the caller's context variables.
        """
        later = functools.partial(
            self._loop.call_later,
            delay,
            callback,
            argument,
            context=self._bare_context,
        )
        if threading.current_thread() is self._thread:
            later()
        else:
            self._loop.call_soon_threadsafe(later)

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
        """Runs ``callback`` on the loop after ``delay`` seconds; cancellable
        from any thread. From the loop's own thread it is set at once, with
        no hand-over."""
        handle: list[asyncio.TimerHandle] = []
        if threading.current_thread() is self._thread:
            handle.append(self._loop.call_later(delay, callback))
            return _LaterHandle(self._loop, handle)

        def schedule() -> None:
            handle.append(self._loop.call_later(delay, callback))

        self._loop.call_soon_threadsafe(schedule)
        return _LaterHandle(self._loop, handle)

    def close(self) -> None:
        """Cancels what still runs and stops the loop thread."""
        if not self._loop.is_running():
            return

        async def _shutdown() -> None:
            tasks = [
                task
                for task in asyncio.all_tasks(self._loop)
                if task is not asyncio.current_task()
            ]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(_shutdown(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()


class _LaterHandle:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, handle: list[asyncio.TimerHandle]
    ) -> None:
        self._loop = loop
        self._handle = handle

    def cancel(self) -> None:
        def _cancel() -> None:
            for handle in self._handle:
                handle.cancel()

        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(_cancel)
