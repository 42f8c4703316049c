"""Work a pooled run hands on to its own worker (``ActorPool.hand_on_here``).

A run about to end may keep the next run it submits for its own worker:
it starts there once the run returns, and no other thread is woken. The
promise is the run's alone: work kept by a handler whose actor has more
messages goes to any worker, and a handler's promise ends with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pykka

from turnlog.actors.actor_pool import ActorPool, PooledActor

WAIT = 10.0


class Ran:
    """Where a job ran, once it has."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def __call__(self) -> None:
        self.thread = threading.current_thread()
        self.done.set()

    def where(self) -> threading.Thread:
        assert self.done.wait(WAIT), "the job never ran"
        assert self.thread is not None
        return self.thread


class Handing(PooledActor):
    """Runs what it is told to run in its handler, with its pool at hand."""

    def on_receive(self, message: Callable[[Handing], Any]) -> Any:
        return message(self)


def start(pool: ActorPool) -> pykka.ActorRef[Any]:
    class OnThisPool(Handing):
        pass

    OnThisPool.pool = pool
    return OnThisPool.start()


def test_a_kept_run_starts_on_the_handlers_worker_once_it_returns(
    pool: ActorPool,
) -> None:
    ref = start(pool)
    job = Ran()

    def keep(actor: Handing) -> threading.Thread:
        pool.hand_on_here()
        pool.submit(job)
        assert not job.done.is_set()  # not while the handler runs
        return threading.current_thread()

    handler_thread = ref.ask(keep, timeout=WAIT)
    assert job.where() is handler_thread
    assert pool.threads_started == 1


def test_only_the_next_submit_is_kept(pool: ActorPool) -> None:
    ref = start(pool)
    first, second = Ran(), Ran()

    def keep_two(actor: Handing) -> list[bool]:
        pool.hand_on_here()
        pool.submit(first)
        pool.submit(second)
        kept = pool.kept_here()
        assert kept is not None
        return [kept.run is first, kept.run is second]

    assert ref.ask(keep_two, timeout=WAIT) == [True, False]
    first.where(), second.where()


def test_work_kept_by_an_actor_with_more_messages_runs_elsewhere_meanwhile(
    pool: ActorPool,
) -> None:
    ref = start(pool)
    job = Ran()

    def keep_then_wait(actor: Handing) -> None:
        # The next message is in the inbox before the handler returns: the
        # run goes on, and waits for the kept job, which must not wait for
        # the run to end.
        actor.actor_ref.tell(lambda _actor: job.done.wait(WAIT))
        pool.hand_on_here()
        pool.submit(job)

    ref.tell(keep_then_wait)
    handler_thread = ref.ask(lambda _actor: threading.current_thread(), timeout=WAIT)
    assert job.where() is not handler_thread


def test_a_handlers_promise_ends_with_it(pool: ActorPool) -> None:
    ref = start(pool)
    job = Ran()
    kept_by_the_next: list[bool] = []
    submitted = threading.Event()

    def promise_only(actor: Handing) -> None:
        pool.hand_on_here()  # and hands nothing on
        actor.actor_ref.tell(submit_plainly)  # handled in the same run

    def submit_plainly(actor: Handing) -> None:
        pool.submit(job)
        kept = pool.kept_here()
        assert kept is not None
        kept_by_the_next.append(kept.run is job)
        submitted.set()

    ref.tell(promise_only)
    assert submitted.wait(WAIT)
    assert kept_by_the_next == [False]
    job.where()


def test_off_the_pool_nothing_is_kept(pool: ActorPool) -> None:
    job = Ran()
    pool.hand_on_here()
    pool.submit(job)
    assert pool.kept_here() is None
    assert job.where() is not threading.current_thread()
