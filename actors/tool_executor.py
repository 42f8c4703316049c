"""The ToolExecutor: runs tool calls off every actor's thread.

Sync handlers run on the actor pool's workers, async handlers on the I/O
loop; at most ``max_concurrency`` calls run at once and the rest wait in
FIFO order. Each call has an optional timeout. A handler that raises and
a call past its timeout become error outputs: a tool never crashes the
turn. Every output is cut to the call's limit (``RunTool.max_output``,
see ``turnlog.domain.tool_output``) before the session hears of it.

It is a plain object shared by a runtime's sessions, not an actor: its
work is a little bookkeeping (a queue of waiting calls, a table of running
ones) and handing calls to the pool or the loop, none of which blocks. So
that work runs on the thread that has the news, under a lock held for the
bookkeeping alone (never while a tool runs or a result is told): the
thread that hands a call over (a session's, or a TurnActor's on the loop)
starts it; the call reports its own end where it ran (a pool worker, the
loop), telling the session and freeing its slot; the loop's timer times
it out. A thread of the executor's own would add two hand-overs (a futex
wake and a GIL transfer each) to every call, one to take it and one to
hear that it ended.

A sync call started by a session's handler runs on that handler's
worker once the session has nothing more to handle, and its output is
handled there too (``ActorPool.hand_on_here``): the session's thread
does not change for the call, where a pool of the executor's own cost
two hand-overs, to the tool's thread and back. A sync call started
elsewhere (by a TurnActor on the loop) costs those two. Threads held by
sync calls, running or abandoned at their timeout, are at most
``max_concurrency``, as a bounded pool's would be: a call due while they
are all held waits for one (its deadline running) in ``_parked``.

Each call is answered exactly once, by whoever settles it first: its
handler returning or raising, its timeout, or the executor failing. A
cancelled call (``cancel``: its turn ended) is answered by nobody; its
turn wants no result. A sync handler cannot be stopped once it runs;
after a timeout, a cancel, or after the runtime closed, its thread
finishes in the background and its result is dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import heapq
import itertools
import logging
import threading
import time
from collections import deque
from typing import Any

import pykka

from turnlog.actors.actor_pool import POOL, ActorPool
from turnlog.actors.io_loop import IoLoop
from turnlog.actors.messages import RunTool
from turnlog.domain.tool_output import DEFAULT_MAX_TOOL_OUTPUT, limit_output
from turnlog.domain.turn_facts import ToolFinished

DEFAULT_MAX_CONCURRENCY = 16

logger = logging.getLogger(__name__)


class _Call:
    __slots__ = ("dropped", "future", "holds_thread", "request", "token")

    def __init__(self, token: int, request: RunTool) -> None:
        self.token = token
        self.request = request
        self.future: concurrent.futures.Future[Any] | None = None
        """An async call's run on the loop (a sync call's checks ``dropped``
        when it starts)."""
        self.dropped = False
        """Cancelled or timed out: what it runs is to be cancelled too."""
        self.holds_thread = False
        """A sync call given one of the threads ``max_concurrency`` allows,
        until its run ends."""


class _Deadlines:
    """When running sync calls time out, on one timer of the I/O loop.

    A timer of its own for each call would cost two more hand-overs to the
    loop: set from the thread that starts the call, cancelled from the
    worker it ends on. Instead the deadlines wait in a heap and one timer
    is armed, for the earliest: a call whose deadline is no earlier than
    the armed one (with one timeout for all, every call) arms nothing, and
    a call that ends leaves its entry to be dropped when the timer comes.
    Guarded by the executor's lock.
    """

    __slots__ = ("_armed", "_heap")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._armed: float | None = None  # the earliest timer set

    def add(self, deadline: float, token: int, running: dict[int, _Call]) -> bool:
        """Notes a call's deadline; True if a timer must be set for it."""
        heap = self._heap
        if len(heap) > 2 * len(running) + 64:  # ended calls' entries: dropped
            self._heap = heap = [entry for entry in heap if entry[1] in running]
            heapq.heapify(heap)
        heapq.heappush(heap, (deadline, token))
        if self._armed is None or deadline < self._armed:
            self._armed = deadline
            return True
        return False

    def passed(
        self, at: float, running: dict[int, _Call]
    ) -> tuple[list[int], float | None]:
        """At the timer set for ``at``: the running calls past their
        deadlines, and the deadline to set a timer for next (None: none)."""
        if self._armed == at:
            self._armed = None
        # A loop's timer may run up to its clock's resolution early.
        now = time.monotonic() + 0.001
        heap, expired = self._heap, []
        while heap and (heap[0][0] <= now or heap[0][1] not in running):
            deadline, token = heapq.heappop(heap)
            if deadline <= now and token in running:
                expired.append(token)
        if heap and (self._armed is None or heap[0][0] < self._armed):
            self._armed = heap[0][0]
            return expired, self._armed
        return expired, None


class ToolExecutor:
    """Runs tool calls concurrently, up to a limit, with timeouts.

    Thread-safe: ``run`` and ``cancel`` are called from session actors'
    threads and the I/O loop; completions arrive on pool workers and the
    loop.
    """

    def __init__(
        self,
        io_loop: IoLoop,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        pool: ActorPool = POOL,
    ) -> None:
        self._io_loop = io_loop
        self._max = max_concurrency
        self._pool = pool
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()
        # Guarded by the lock:
        self._waiting: deque[_Call] = deque()
        self._running: dict[int, _Call] = {}
        self._stopped: str | None = None  # why it takes no more calls
        self._closed = False  # stopped: a sync call not yet begun never runs
        self._threads = 0  # held by sync calls: running, or abandoned running
        self._parked: deque[_Call] = deque()  # due sync calls with no thread yet
        self._deadlines = _Deadlines()

    def run(self, request: RunTool) -> None:
        """Runs ``request``; its ToolFinished goes to ``request.reply_to``.

        Never blocks. Raises pykka.ActorDeadError, as telling the actor it
        once was did, if the executor has stopped (the runtime closed) or
        failed.
        """
        with self._lock:
            if self._stopped is not None:
                raise pykka.ActorDeadError(self._stopped)
            self._waiting.append(_Call(next(self._tokens), request))
            due = self._due()
        self._start_all(due)

    def cancel(self, key: str) -> None:
        """Forgets (and cancels where it can) every call made under ``key``."""
        with self._lock:
            self._waiting = deque(c for c in self._waiting if c.request.key != key)
            cancelled = [c for c in self._running.values() if c.request.key == key]
            for call in cancelled:
                del self._running[call.token]
                call.dropped = True
            due = self._due()
        for call in cancelled:
            _cancel_running(call.request)
            _drop(call)
        self._start_all(due)

    def stop(self) -> None:
        """Takes no more calls and cancels those not yet started.

        Calls still running finish in the background; their sessions have
        stopped before the runtime stops the executor.
        """
        with self._lock:
            if self._stopped is None:
                self._stopped = "the tool executor has stopped"
            self._closed = True
            self._parked.clear()

    # -- the bookkeeping ---------------------------------------------------------

    def _due(self) -> list[_Call]:
        """Moves waiting calls to the running table while there is room
        (under the lock); the caller starts them once it let go of it."""
        due = []
        while self._waiting and len(self._running) < self._max:
            call = self._waiting.popleft()
            self._running[call.token] = call
            due.append(call)
        return due

    def _start_all(self, due: list[_Call]) -> None:
        for index, call in enumerate(due):
            try:
                self._start(call)
            except Exception as error:  # noqa: BLE001 - answered in _fail
                self._fail(error, due[index:])
                return

    def _start(self, call: _Call) -> None:
        if not call.request.tool.is_async:
            self._start_sync(call)
            return
        coroutine = self._run_async(call)
        try:
            future = self._io_loop.submit(coroutine)
        except BaseException as error:
            coroutine.close()  # never awaited: no warning about it
            if not isinstance(error, Exception):
                raise
            self._settle(call, _not_started(error, self._stopped), True)
            return
        call.future = future
        if call.dropped:  # cancelled while being started
            future.cancel()

    def _start_sync(self, call: _Call) -> None:
        timeout = call.request.tool.timeout
        arm = None
        with self._lock:
            given = self._threads < self._max
            if given:
                self._threads += 1
                call.holds_thread = True
            else:
                self._parked.append(call)
            if timeout is not None and call.token in self._running:
                deadline = time.monotonic() + timeout
                if self._deadlines.add(deadline, call.token, self._running):
                    arm = deadline
        if arm is not None:
            self._arm(arm)
        if given:
            self._give_thread(call)

    def _give_thread(self, call: _Call) -> None:
        """Runs a sync call on a worker: the calling one once its run
        returns, if that is a session's handler's (see the module's doc)."""
        pool = self._pool
        pool.hand_on_here()
        try:
            pool.submit(functools.partial(self._run_sync, call))
        except Exception as error:  # noqa: BLE001 - no thread: the model hears why
            # The pool keeps the run for its next free worker, where it
            # sees ``dropped``: answered as not run, it never runs.
            call.dropped = True
            self._thread_freed(call)
            self._settle(call, _not_started(error, self._stopped), True)

    def _run_sync(self, call: _Call) -> None:
        # On a pool worker. A call dropped (cancelled, timed out) before it
        # began does not run, nor does any once the executor stopped.
        if not (call.dropped or self._closed):
            request = call.request
            try:
                result = request.tool.run_sync(request.arguments, request.context)
                output, is_error, media = _shown(result)
            except BaseException as error:  # noqa: BLE001 - an error output
                output, is_error, media = _failed(error), True, ()
            # What is left of this run is telling the session: its worker
            # handles the output next, no other thread woken for it.
            self._pool.hand_on_here()
            self._settle(call, output, is_error, media)
        self._thread_freed(call)

    def _thread_freed(self, call: _Call) -> None:
        """``call`` lets go of its thread (if it still holds one): a parked
        call may take it."""
        with self._lock:
            if not call.holds_thread:
                return
            call.holds_thread = False
            self._threads -= 1
            parked = self._parked
            while parked and parked[0].dropped:
                parked.popleft()  # answered at its deadline (or cancelled)
            if not parked:
                return
            waited = parked.popleft()
            self._threads += 1
            waited.holds_thread = True
        self._give_thread(waited)

    async def _run_async(self, call: _Call) -> None:
        # On the I/O loop, and so is its timer: no hand-over to set or
        # cancel it.
        request = call.request
        timeout = request.tool.timeout
        timer = None
        if timeout is not None:
            task = asyncio.current_task()
            assert task is not None

            def expire() -> None:
                self._settle(call, _timed_out(timeout), True)
                task.cancel()

            timer = asyncio.get_running_loop().call_later(timeout, expire)
        try:
            result = await request.tool.run_async(request.arguments, request.context)
            output, is_error, media = _shown(result)
        except asyncio.CancelledError:
            # By a cancel or a timeout, which settled it first, or by the
            # runtime closing, or by the tool itself: answered if not yet.
            self._settle(call, "tool call was cancelled", True)
            raise
        except Exception as error:  # noqa: BLE001 - an error output
            output, is_error, media = _failed(error), True, ()
        finally:
            if timer is not None:
                timer.cancel()
        self._settle(call, output, is_error, media)

    def _arm(self, deadline: float) -> None:
        delay = max(0.0, deadline - time.monotonic())
        self._io_loop.call_later(
            delay, functools.partial(self._deadline_passed, deadline)
        )

    def _deadline_passed(self, at: float) -> None:
        # On the I/O loop: the sync calls past their deadlines are answered
        # now; their threads finish in the background.
        with self._lock:
            tokens, arm = self._deadlines.passed(at, self._running)
            expired = [self._running.pop(token) for token in tokens]
            for call in expired:
                call.dropped = True
            due = self._due()
        for call in expired:
            timeout = call.request.tool.timeout
            _reply(call.request, _timed_out(timeout), True)
            _drop(call)
        if arm is not None:
            self._arm(arm)
        self._start_all(due)

    def _settle(
        self,
        call: _Call,
        output: str,
        is_error: bool,
        media: tuple[dict[str, str], ...] = (),
    ) -> None:
        """Answers ``call`` with ``output`` unless it was answered (or
        cancelled) already, and starts what waited for its slot."""
        with self._lock:
            mine = self._running.pop(call.token, None) is not None
            due = self._due()
        if mine:
            _reply(call.request, output, is_error, media)
        self._start_all(due)

    def _fail(self, error: Exception, stranded: list[_Call]) -> None:
        """The bookkeeping failed: answers every call that will not report
        by itself (waiting, or about to start) and takes no more calls, or
        their turns would wait for them forever. Running calls still
        report when they end.
        """
        logger.error("the tool executor failed", exc_info=error)
        name = type(error).__name__
        reason = f"not run: the tool executor failed: {name}: {error}"
        with self._lock:
            self._stopped = f"the tool executor failed: {name}: {error}"
            for call in stranded:
                self._running.pop(call.token, None)
            answered = [*stranded, *self._waiting]
            self._waiting.clear()
        for call in answered:
            _reply(call.request, reason, True)


def _drop(call: _Call) -> None:
    """Cancels a call settled or cancelled elsewhere: an async call's run on
    the loop (a sync call not yet begun sees ``dropped`` and does not run)."""
    if call.future is not None:
        call.future.cancel()


def _timed_out(timeout: float) -> str:
    return f"tool timed out after {timeout:g} s"


def _not_started(error: Exception, stopped: str | None) -> str:
    if stopped is not None:
        return f"tool not run: {stopped}"
    if isinstance(error, RuntimeError):  # the interpreter is exiting: no threads
        return "tool not run: the process is exiting"
    return _failed(error)


def _failed(error: BaseException) -> str:
    return f"tool failed: {type(error).__name__}: {error}"


def _cancel_running(request: RunTool) -> None:
    # A running sync call cannot be stopped, but a tool that runs work of
    # its own (an agent tool's child session) can be told to stop it.
    cancel = getattr(request.tool, "cancel", None)
    if callable(cancel):
        try:
            cancel(request.context)
        except Exception:  # a tool's cancel must not stop the executor
            logger.warning("could not cancel %r", request.tool, exc_info=True)


def _reply(
    request: RunTool,
    output: str,
    is_error: bool,
    media: tuple[dict[str, str], ...] = (),
) -> None:
    # The model sees (and the log keeps) no more than the call's limit.
    limit = request.max_output or DEFAULT_MAX_TOOL_OUTPUT
    output = limit_output(output, limit)
    # A turn stopped (its session closed, or the runtime) wants no result.
    # try, not contextlib.suppress: three Python calls less on every call.
    try:  # noqa: SIM105
        request.reply_to.tell(
            ToolFinished(request.turn, request.call_id, output, is_error, media=media)
        )
    except pykka.ActorDeadError:
        pass


def _shown(result: Any) -> tuple[str, bool, tuple[dict[str, str], ...]]:
    """A tool's result as the session records it: output, error, media."""
    # Media is optional: a tool's own outcome type may not carry any.
    media = tuple(dict(part) for part in getattr(result, "media", ()))
    return str(result.output), bool(result.is_error), media
