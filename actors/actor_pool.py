"""Actors that borrow a thread while they have messages, not for their life.

A pykka ``ThreadingActor`` is a thread: started when the actor starts,
blocked on its inbox whenever it has nothing to do, ended when it stops.
A session spends most of its life waiting (on its model, its tools, its
user), so a process with a thousand sessions waiting on models held a
thousand threads, started one for every session it created or revived,
and ended one for every session that passivated.

A ``PooledActor`` keeps what makes it an actor: one message at a time,
in the order each sender told them, from the same inbox pykka's refs put
into, with pykka's replies, stop and failure handling. What changes is
where its handlers run: when a message arrives for an actor that is not
running, the actor is handed to the shared ``ActorPool``, whose worker
threads run it until its inbox is empty, then go on to the next actor
that has mail. Threads follow the sessions doing something, as DESIGN
section 11 asks, not the sessions open.

The pool has no bound: when every worker is busy it starts another, so
no actor ever waits for a thread another actor's handler holds, and a
handler may block (a save waits for its commit) without stopping the
others, nor wait for ever on an actor that is waiting for a worker. So
the threads are at most what they were with a thread an actor, and as
few as the handlers running at once. ``SPARE_WORKERS`` idle workers wait
``IDLE_SECONDS`` for more; the rest end sooner.

A run that ends by giving work to another (a sync tool's end tells its
session, a session's handler starts a sync tool) may instead keep that
work on its own worker (``hand_on_here``): it starts when the run
returns, with no other thread woken for it. Each hand-over spared is a
futex wake, a GIL transfer and the work's objects taken to wherever the
woken thread runs: on two cores, a turn whose tool call and its answer
stay on the session's worker costs about a tenth less CPU than with the
call on a tool thread (bench/RESULTS.md, issue 24's fourteenth pass).

It runs pykka 4's own loop steps (``_actor_loop_setup``,
``_handle_receive``, ``_actor_loop_teardown``), which are not public:
tests/actors/test_actor_pool.py holds the semantics, so a pykka release
that changes them fails there first.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import pykka
from pykka import ActorRegistry

from turnlog.actors.stop_flag import StopFlag

logger = logging.getLogger("turnlog.actors")

_make_hook = getattr(threading, "_make_invoke_excepthook", None)
SHARED_EXCEPTHOOK: Any = _make_hook() if _make_hook is not None else None
"""CPython's per-thread excepthook closure, made once for every worker.

``threading.Thread()`` makes each thread its own (a function, its five
cells and their tuple), kept for the thread's life, and only reads it if
an exception escapes the thread's target, which a worker never lets
happen (issue 24: fewer objects for the collector to walk)."""

IDLE_SECONDS = 30.0
"""How long a worker with nothing to run waits before it ends."""
SPARE_WORKERS = 16
"""Idle workers that wait IDLE_SECONDS; those idle beyond them end after
SURPLUS_SECONDS. A burst (a thousand sessions saving together) may need
hundreds of workers at its peak, nearly all waiting on commits: within
it, workers are reused rather than ended and started again (which cost
the burst a tenth of its sessions/s when they ended at once); after it, a
few stay for the next messages and the rest soon go."""
SURPLUS_SECONDS = 5.0
"""Longer than a model call usually takes: at 1 s, the workers of a burst
of sessions waiting on a 1 s model ended just as the answers came."""


class KeptRun:
    """A worker's next run, kept for it by the run it is running now."""

    __slots__ = ("keep", "run")

    def __init__(self) -> None:
        self.keep = False
        """The next run this worker submits is kept (``hand_on_here``)."""
        self.run: Callable[[], None] | None = None
        """What runs on this worker once its current run returns."""


class _Here(threading.local):
    """What a thread is to its pool: ``kept`` is set on the pool's workers."""

    kept: KeptRun | None = None


class ActorPool:
    """Threads that run pooled actors' messages; thread-safe."""

    def __init__(
        self,
        idle_seconds: float = IDLE_SECONDS,
        name: str = "SessionWorker",
        spare: int = SPARE_WORKERS,
        surplus_seconds: float = SURPLUS_SECONDS,
    ) -> None:
        self.idle_seconds = idle_seconds
        self.spare = spare
        """Idle workers that wait ``idle_seconds`` (see SPARE_WORKERS)."""
        self.surplus_seconds = surplus_seconds
        self.name = name
        """Its workers' thread names: ``name-1``, ``name-2``..."""
        self._work: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        """Workers waiting for work and not yet promised any."""
        self._stranded = 0
        """Runs queued for a worker that did not start: promised to none."""
        self._workers = 0
        self._quiet = threading.Condition(self._lock)
        self._watching = 0
        self._numbers = itertools.count(1)
        self.threads_started = 0
        """Workers started so far (for tests and benchmarks)."""
        self._here = _Here()

    def submit(self, run: Callable[[], None]) -> None:
        """Runs ``run`` on a worker: an idle one, else a new one; or, right
        after ``hand_on_here``, on the calling worker once its run returns."""
        kept = self._here.kept
        if kept is not None and kept.keep:
            kept.keep = False
            kept.run = run
            return
        with self._lock:
            start = self._idle == 0
            if start:
                self._workers += 1
                self.threads_started += 1
            else:
                self._idle -= 1  # that worker's next item is this one
        self._work.put(run)
        if start:
            self._start_worker()

    def hand_on_here(self) -> None:
        """Keeps the next run the calling worker submits for that worker.

        For a run about to end that has nothing left to wait for (only to
        hand work on): the work starts on this worker when the run returns,
        and no other thread is woken. On a thread that is not one of this
        pool's workers, or a worker that keeps a run already, it does
        nothing: the work goes to any worker, as ever.
        """
        kept = self._here.kept
        if kept is not None and kept.run is None:
            kept.keep = True

    def kept_here(self) -> KeptRun | None:
        """The calling worker's kept run (None off this pool's workers)."""
        return self._here.kept

    def forget_workers(self) -> None:
        """Called in a forked child, which has none of its parent's threads:
        nothing is idle, and what was queued was the parent's."""
        self._work = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._quiet = threading.Condition(self._lock)
        self._idle = self._workers = self._watching = self._stranded = 0

    @property
    def workers(self) -> int:
        """Workers running now, busy or idle."""
        return self._workers

    def wait_until_quiet(self, timeout: float) -> bool:
        """Waits until no worker is running anything and nothing is queued
        (tests: an actor's last handler has let go of it). False if that
        did not happen within ``timeout`` seconds."""
        return self._wait(
            lambda: self._idle == self._workers and not self._stranded, timeout
        )

    def wait_for_workers(self, at_most: int, timeout: float) -> bool:
        """Waits until at most ``at_most`` workers are left (tests,
        benchmarks); False if more were, ``timeout`` seconds on."""
        return self._wait(lambda: self._workers <= at_most, timeout)

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        with self._quiet:
            self._watching += 1
            try:
                return self._quiet.wait_for(done, timeout)
            finally:
                self._watching -= 1

    def _start_worker(self) -> None:
        thread = threading.Thread(
            target=self._work_loop,
            name=f"{self.name}-{next(self._numbers)}",
            # A runtime left open must not hold its process at exit: it is
            # closed from an atexit hook, which Python runs only once the
            # non-daemon threads have ended.
            daemon=True,
        )
        if SHARED_EXCEPTHOOK is not None and hasattr(thread, "_invoke_excepthook"):
            thread._invoke_excepthook = SHARED_EXCEPTHOOK
        try:
            thread.start()
        except BaseException:
            # No thread (the process is at its limit): what was queued runs
            # on the next worker that is free; the sender hears of it.
            with self._lock:
                self._workers -= 1
                self.threads_started -= 1
                self._stranded += 1
            raise

    def _work_loop(self) -> None:
        work, lock = self._work, self._lock
        kept = self._here.kept = KeptRun()
        surplus = False
        while True:
            try:
                run = work.get(
                    timeout=self.surplus_seconds if surplus else self.idle_seconds
                )
            except queue.Empty:
                with lock:
                    # Every idle worker was promised an item already queued
                    # (or on its way): this one must stay to take its own.
                    if self._idle == 0:
                        continue
                    if surplus and self._idle <= self.spare:
                        # The surplus has gone: this one stays, as a spare.
                        surplus = False
                        continue
                    self._idle -= 1
                    self._workers -= 1
                    if self._watching:
                        self._quiet.notify_all()
                return
            while True:
                try:
                    run()
                except Exception:  # a run handles its actor's failures itself
                    logger.exception("a pooled actor's run failed")
                kept.keep = False  # what the run meant to hand on, it did
                handed = kept.run
                if handed is None:
                    break
                kept.run, run = None, handed
            del run, handed  # not kept alive while this worker waits
            with lock:
                if self._stranded:
                    # A run whose worker never started is queued: this one
                    # takes it, and is not idle meanwhile.
                    self._stranded -= 1
                    continue
                self._idle += 1
                surplus = self._idle > self.spare
                if self._watching:
                    self._quiet.notify_all()


POOL = ActorPool()
"""The pool every session's actor runs on."""
os.register_at_fork(after_in_child=POOL.forget_workers)


class PoolInbox:
    """A pooled actor's inbox: pykka's refs put here; the pool drains it."""

    __slots__ = ("_actor", "_items", "_lock", "_scheduled")

    def __init__(self, actor: PooledActor) -> None:
        self._actor: PooledActor | None = actor
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        # Until the actor's loop starts, mail waits: on_start comes first.
        self._scheduled = True

    def put(self, envelope: Any) -> None:
        with self._lock:
            self._items.append(envelope)
            if self._scheduled:
                return
            self._scheduled = True
            actor = self._actor
        assert actor is not None  # detached only once scheduled for good
        actor.pool.submit(actor._run_messages)

    def detach(self) -> None:
        """Lets go of the stopped actor. An actor and its inbox hold each
        other (the inbox is what keeps an idle actor alive); without this a
        stopped session would be left for the garbage collector to free."""
        with self._lock:
            self._actor = None
            self._scheduled = True  # nothing more runs: mail stays here

    def empty(self) -> bool:
        return not self._items

    def get_nowait(self) -> Any:
        """The next message; raises queue.Empty if there is none."""
        with self._lock:
            if not self._items:
                raise queue.Empty
            return self._items.popleft()

    get = get_nowait  # pykka's teardown calls it only while not empty

    def next_or_release(self) -> Any:
        """The next message, or None after marking the actor unscheduled:
        the next put hands it to the pool again."""
        with self._lock:
            if self._items:
                return self._items.popleft()
            self._scheduled = False
            return None


class PooledActor(pykka.ThreadingActor):
    """A ThreadingActor whose messages run on the shared ``ActorPool``."""

    pool: ActorPool = POOL
    """Where this actor's messages run (a test may give a class its own)."""
    actor_inbox: PoolInbox

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # pykka made a threading.Event; its ref took the same one.
        stopped = StopFlag()
        self.actor_stopped = self._actor_ref.actor_stopped = stopped  # type: ignore[assignment]

    def _create_actor_inbox(self) -> PoolInbox:  # type: ignore[override]
        # pykka's hook (a static method there; called on the instance).
        return PoolInbox(self)

    def _start_actor_loop(self) -> None:
        self.pool.submit(self._start_and_run)

    def _start_and_run(self) -> None:
        self._actor_loop_setup()
        self._run_messages()

    def _run_messages(self) -> None:
        """Handles what the inbox holds, on this worker, until it is empty
        or the actor has stopped."""
        inbox = self.actor_inbox
        # The StopFlag made in __init__ (pykka types the attribute as the
        # Event it would have made).
        flag: StopFlag = self.actor_stopped  # type: ignore[assignment]
        kept = self.pool.kept_here()
        while not flag.stopped:
            envelope = inbox.next_or_release()
            if envelope is None:
                return
            if kept is not None:
                kept.keep = False  # a handler's hand_on_here is for its own end
                if kept.run is not None:
                    # A handler kept work for after this run, but the run
                    # goes on: the work is not held back for more messages.
                    handed, kept.run = kept.run, None
                    self.pool.submit(handed)  # to any worker: keep is off
            self._handle_envelope(envelope)
        self._actor_loop_teardown()
        inbox.detach()

    def _handle_envelope(self, envelope: Any) -> None:
        # What pykka's _actor_loop_running does for one message.
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                logger.info(
                    f"Exception returned from {self} to caller:",
                    exc_info=sys.exc_info(),
                )
                envelope.reply_to.set_exception()
            else:
                self._handle_failure(*sys.exc_info())
                try:
                    self.on_failure(*sys.exc_info())
                except Exception:  # noqa: BLE001
                    self._handle_failure(*sys.exc_info())
        except BaseException:  # noqa: BLE001
            exception_value = sys.exc_info()[1]
            logger.debug(f"{exception_value!r} in {self}. Stopping all actors.")
            self._stop()
            ActorRegistry.stop_all()
