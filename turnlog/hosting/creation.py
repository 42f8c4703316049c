"""Creating sessions: the checks at the boundary, and creations off the caller's loop.

``Runtime.create_session`` and ``Runtime.create_session_async`` check their
arguments here (:func:`check_creation`) before anything is leased or
written. The asynchronous one then opens the session on a
:class:`CreationPool`: a few threads the runtime owns, so that the caller's
event loop never waits on a commit. Many creations in flight at once save
at the same moment, and the store's group commit (turnlog.store.group_commit)
writes them in one transaction: under load a commit holds as many new
sessions as there are threads, where creations one after another on the
loop would pay one commit each.

A creation handed to the pool always runs to its end, whether or not
anyone still awaits it: a caller cancelled meanwhile finds the session
in the log (durable, as any other), and its handle, which nobody took, is
let go (the session passivates). So a creation is never half made: it
is recorded whole (the session's first events and its lease, in one
commit), or it fails and leaves nothing.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

from turnlog.actors.session_parts import SessionDeps, SessionSettings
from turnlog.agent import Agent
from turnlog.config import RunConfig
from turnlog.domain.errors import InvalidInputError, RuntimeClosedError
from turnlog.domain.ids import check_session_id, new_submission_id
from turnlog.domain.inputs import check_json_data

logger = logging.getLogger(__name__)

CREATION_THREADS = 32
"""Threads opening sessions for ``create_session_async`` at most.

As many creations can wait on one commit together; more threads make
bigger commits under a burst, and cost a thread each while it lasts.
"""

T = TypeVar("T")


class Creation(NamedTuple):
    """A session to open, its arguments checked."""

    agent: Agent
    session_id: str
    shared_state: dict[str, Any] | None
    settings: SessionSettings
    event_buffer: int


def check_creation(
    agent: object,
    *,
    session_id: str | None,
    shared_state: object,
    run_config: object,
    deps: object,
    defaults: RunConfig,
) -> Creation:
    """Checks ``create_session``'s arguments; raises InvalidInputError (or
    UsageError for an agent whose handoff graph does not hold).

    The session id is ``session_id``, else the run config's, else a new one.
    """
    if not isinstance(agent, Agent):
        msg = f"agent must be a turnlog.Agent, not {type(agent).__name__}"
        raise InvalidInputError(msg)
    agent.handoff_graph()  # a graph with clashing or unknown names: refused here
    if run_config is not None and not isinstance(run_config, RunConfig):
        msg = "run_config must be a turnlog.RunConfig"
        raise InvalidInputError(msg)
    config = run_config or defaults
    if session_id is not None:
        chosen = check_session_id(session_id)
    elif config.session_id is not None:
        chosen = check_session_id(config.session_id)
    else:
        chosen = f"session-{new_submission_id()[:12]}"
    if shared_state is not None and not isinstance(shared_state, dict):
        msg = "shared_state must be a dict"
        raise InvalidInputError(msg)
    if shared_state:
        check_json_data(shared_state, "shared state")
    agent.check_deps(deps)
    settings = SessionSettings(
        approval_policy=config.approval_policy,
        approval_provider=config.approval_provider,
        approval_timeout=config.approval_timeout,
        idle_timeout=config.idle_timeout,
        deps=SessionDeps(deps),
    )
    return Creation(agent, chosen, shared_state, settings, config.event_buffer)


class _Job(Generic[T]):
    """One call for the pool, and where its outcome goes."""

    __slots__ = ("call", "future", "outcomes")

    def __init__(
        self,
        call: Callable[[], T],
        outcomes: _Outcomes,
        future: asyncio.Future[T],
    ) -> None:
        self.call = call
        self.outcomes = outcomes
        self.future = future

    def run(self) -> None:
        """Runs the call, then hands its outcome to the awaiting loop."""
        try:
            result = self.call()
        except BaseException as error:  # noqa: BLE001 - the caller gets it
            self.outcomes.hand_over(_fail, self.future, error)
        else:
            self.outcomes.hand_over(_succeed, self.future, result)


class _Outcomes:
    """Outcomes bound for one event loop, handed over a batch per wake-up.

    Each ``call_soon_threadsafe`` writes to the loop's self-pipe and wakes
    it; creations that commit together finish together, so while one
    hand-over waits for the loop, later outcomes join it instead of
    waking the loop again.
    """

    __slots__ = ("_lock", "_loop", "_pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: the pool keeps one of these per loop, keyed weakly by it.
        self._loop = weakref.ref(loop)
        self._lock = threading.Lock()
        self._pending: list[tuple[Callable[[Any, Any], None], Any, object]] = []

    def hand_over(
        self,
        settle: Callable[[asyncio.Future[T], Any], None],
        future: asyncio.Future[T],
        outcome: object,
    ) -> None:
        with self._lock:
            self._pending.append((settle, future, outcome))
            if len(self._pending) > 1:
                return  # the wake-up asked for takes this one too
        # A loop that has closed (or gone) meanwhile awaits nothing: the
        # outcome is dropped (a session made stays in the log; its handle is
        # let go).
        loop = self._loop()
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._settle_all)
            except RuntimeError:  # closed
                pass
            else:
                return
        with self._lock:
            self._pending.clear()

    def _settle_all(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        for settle, future, outcome in batch:
            settle(future, outcome)


def _succeed(future: asyncio.Future[T], result: T) -> None:
    if not future.done():  # else cancelled: nobody takes the handle
        future.set_result(result)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
    else:
        logger.debug("a cancelled creation failed", exc_info=error)


class CreationPool:
    """Threads that run blocking calls for coroutines, started as needed.

    A call is handed to a thread waiting for one, else to a new thread, up
    to ``max_threads``; beyond that calls queue. Threads are daemons, and
    :meth:`close` joins them (see turnlog.hosting.exit_hook for why daemons).

    Args:
        max_threads: Calls that run at once at most.
    """

    def __init__(self, max_threads: int = CREATION_THREADS) -> None:
        self._max_threads = max_threads
        self._lock = threading.Lock()
        self._jobs: collections.deque[_Job[Any]] = collections.deque()
        self._ready = threading.Condition(self._lock)
        self._waiting = 0
        """Threads waiting for a job and not yet woken for one."""
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._outcomes: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, _Outcomes
        ] = weakref.WeakKeyDictionary()

    async def run(self, call: Callable[[], T]) -> T:
        """Runs ``call`` on a pool thread; its result, or what it raised.

        The calling task may be cancelled meanwhile: ``call`` still runs,
        and its result is dropped. Raises RuntimeClosedError once the
        pool is closed.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._closed:
                msg = "the runtime was closed"
                raise RuntimeClosedError(msg)
            outcomes = self._outcomes.get(loop)
            if outcomes is None:
                outcomes = self._outcomes[loop] = _Outcomes(loop)
            self._jobs.append(_Job(call, outcomes, future))
            if self._waiting:
                self._waiting -= 1
                self._ready.notify()
            elif len(self._threads) < self._max_threads:
                thread = threading.Thread(
                    target=self._work,
                    name=f"turnlog-create-{len(self._threads)}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
        return await future

    def close(self) -> None:
        """Lets the calls queued and running finish, then stops every thread.

        Calls that the runtime, closed first, refuses end at once with
        RuntimeClosedError; each caller is told its own outcome.
        """
        with self._lock:
            self._closed = True
            self._ready.notify_all()
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join()

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._jobs:
                    if self._closed:
                        return
                    self._waiting += 1
                    self._ready.wait()
                job = self._jobs.popleft()
            job.run()
            del job  # a handle nobody took is let go now, not after the next job
