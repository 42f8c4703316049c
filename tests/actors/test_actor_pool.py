"""Pooled actors: pykka's actor semantics, on threads borrowed per message."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, cast

import pykka
import pytest

from turnlog.actors.actor_pool import ActorPool, PooledActor

WAIT = 10.0


def actor_class(pool: ActorPool) -> type[Recorder]:
    class OnThisPool(Recorder):
        pass

    OnThisPool.pool = pool
    return OnThisPool


class Recorder(PooledActor):
    """Keeps what it is told, in the order it handled it, and checks that
    no two of its messages ever run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self.started_first = False
        self._inside = threading.Lock()
        self.overlapped = False
        self.stopped_cleanly = threading.Event()

    def on_start(self) -> None:
        self.started_first = not self.seen

    def on_stop(self) -> None:
        self.stopped_cleanly.set()

    def on_receive(self, message: Any) -> Any:
        if not self._inside.acquire(blocking=False):
            self.overlapped = True
            return None
        try:
            kind, value = message
            if kind == "block":
                value.wait(WAIT)
            if kind == "fail":
                raise RuntimeError(value)
            if kind == "get":
                return (self.started_first, self.overlapped, list(self.seen))
            self.seen.append(value)
            return value
        finally:
            self._inside.release()


def state(ref: pykka.ActorRef[Any]) -> tuple[bool, bool, list[Any]]:
    """Whether on_start ran first, whether messages overlapped, and what it kept."""
    return cast("tuple[bool, bool, list[Any]]", ref.ask(("get", None), timeout=WAIT))


def test_each_senders_messages_are_handled_in_order_one_at_a_time(
    pool: ActorPool,
) -> None:
    ref = actor_class(pool).start()

    def send(n: int) -> None:
        for i in range(300):
            ref.tell(("add", (n, i)))

    senders = [threading.Thread(target=send, args=(n,)) for n in range(4)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(WAIT)
    started_first, overlapped, seen = state(ref)
    assert started_first
    assert not overlapped
    assert len(seen) == 1200
    for n in range(4):
        assert [i for m, i in seen if m == n] == list(range(300))


def test_a_message_sent_before_the_actor_runs_waits_for_on_start(
    pool: ActorPool,
) -> None:
    class TellsItself(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.actor_ref.tell(("add", "from __init__"))

    TellsItself.pool = pool
    ref = TellsItself.start()
    started_first, _, seen = state(ref)
    assert started_first
    assert seen == ["from __init__"]


def test_an_actor_blocked_in_a_handler_does_not_hold_up_the_others(
    pool: ActorPool,
) -> None:
    cls = actor_class(pool)
    blocked, other = cls.start(), cls.start()
    release = threading.Event()
    try:
        blocked.tell(("block", release))
        assert other.ask(("add", 1), timeout=WAIT) == 1
    finally:
        release.set()
    assert blocked.ask(("add", 2), timeout=WAIT) == 2


def test_idle_actors_hold_no_threads(pool: ActorPool) -> None:
    cls = actor_class(pool)
    refs = []
    for n in range(50):
        ref = cls.start()
        assert ref.ask(("add", n), timeout=WAIT) == n
        # Its handler has returned: the worker is free for the next actor.
        assert pool.wait_until_quiet(WAIT)
        refs.append(ref)
    assert pool.threads_started == 1
    assert pool.workers == 1
    for n, ref in enumerate(refs):
        assert state(ref)[2] == [n]


def test_stop_runs_on_stop_and_answers_what_was_queued_behind_it(
    pool: ActorPool,
) -> None:
    ref = actor_class(pool).start()
    release = threading.Event()
    ref.tell(("block", release))
    stopping = ref.stop(block=False)
    behind = ref.ask(("add", "late"), block=False)
    release.set()
    stopping.get(timeout=WAIT)
    with pytest.raises(pykka.ActorDeadError):
        behind.get(timeout=WAIT)
    with pytest.raises(pykka.ActorDeadError):
        ref.tell(("add", "after"))


def test_a_failing_handler_stops_its_actor_and_not_the_pool(
    pool: ActorPool, caplog: pytest.LogCaptureFixture
) -> None:
    failed: list[BaseException | None] = []

    class Failing(Recorder):
        def on_failure(self, exception_type: Any, value: Any, tb: Any) -> None:
            failed.append(value)

    Failing.pool = pool
    failing, other = Failing.start(), actor_class(pool).start()
    # An ask gets the exception back and the actor lives on, as in pykka.
    with pytest.raises(RuntimeError, match="asked"):
        failing.ask(("fail", "asked"), timeout=WAIT)
    assert failing.ask(("add", 1), timeout=WAIT) == 1
    # A tell has no one to answer: the actor fails and stops.
    failing.tell(("fail", "told"))
    failing.actor_stopped.wait(WAIT)
    assert [str(e) for e in failed] == ["told"]
    assert not failing.is_alive()
    assert other.ask(("add", 2), timeout=WAIT) == 2


def test_workers_left_idle_end() -> None:
    pool = ActorPool(idle_seconds=0.05, name="IdleTestWorker")
    ref = actor_class(pool).start()
    try:
        assert ref.ask(("add", 1), timeout=WAIT) == 1
        workers = [t for t in threading.enumerate() if t.name.startswith(pool.name)]
        assert workers
        for worker in workers:
            worker.join(WAIT)
        assert not any(t.is_alive() for t in workers)
        # An idle actor whose worker ended gets a new one for its next message.
        assert ref.ask(("add", 2), timeout=WAIT) == 2
    finally:
        ref.stop()


FORKED_CHILD = """
import os, sys
from turnlog.actors.actor_pool import PooledActor

class Echo(PooledActor):
    def on_receive(self, message):
        return message

parent = Echo.start()
assert parent.ask("before", timeout=10) == "before"
pid = os.fork()
if pid == 0:
    child = Echo.start()
    os._exit(0 if child.ask("in the child", timeout=10) == "in the child" else 1)
_, status = os.waitpid(pid, 0)
parent.stop()
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_starts_workers_of_its_own(tmp_path: Path) -> None:
    # The parent's idle worker does not exist in the child: without the
    # fork hook, the child's first message would wait for it for ever.
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", FORKED_CHILD],
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0


@pytest.mark.skipif(
    not hasattr(threading.Thread(), "_invoke_excepthook"),
    reason="this Python's threads keep no excepthook of their own",
)
def test_workers_share_one_excepthook(pool: ActorPool) -> None:
    cls = actor_class(pool)
    blocked, other = cls.start(), cls.start()
    release = threading.Event()
    try:
        blocked.tell(("block", release))
        assert other.ask(("add", 1), timeout=WAIT) == 1  # on a second worker
    finally:
        release.set()
    workers = [t for t in threading.enumerate() if t.name.startswith(pool.name)]
    assert len(workers) >= 2
    assert len({id(t._invoke_excepthook) for t in workers}) == 1  # type: ignore[attr-defined]


def test_wait_until_quiet_waits_for_the_running_handler(pool: ActorPool) -> None:
    ref = actor_class(pool).start()
    release = threading.Event()
    ref.tell(("block", release))
    assert not pool.wait_until_quiet(0.05)
    release.set()
    assert pool.wait_until_quiet(WAIT)


def test_a_burst_leaves_only_the_spare_workers(pool: ActorPool) -> None:
    pool.spare, pool.surplus_seconds = 2, 0.05
    cls = actor_class(pool)
    refs = [cls.start() for _ in range(6)]
    release = threading.Event()
    try:
        for ref in refs:
            ref.tell(("block", release))
        # Each blocked actor holds a worker: the sixth answer needs a seventh.
        extra = cls.start()
        assert extra.ask(("add", 1), timeout=WAIT) == 1
        assert pool.workers >= 7
    finally:
        release.set()
    for ref in refs:
        assert ref.ask(("add", 2), timeout=WAIT) == 2
    # The surplus ends once idle for surplus_seconds; the spares wait for
    # idle_seconds (longer than this test).
    assert pool.wait_for_workers(2, WAIT)
    assert pool.workers == 2
    assert extra.ask(("add", 3), timeout=WAIT) == 3


def test_work_whose_thread_cannot_start_runs_on_the_next_free_worker(
    pool: ActorPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = actor_class(pool)

    def started() -> pykka.ActorRef[Any]:
        # Once the pool is quiet every worker is idle, and the next actor
        # started takes one of them: no new thread.
        ref = cls.start()
        assert ref.ask(("add", 0), timeout=WAIT) == 0
        assert pool.wait_until_quiet(WAIT)
        return ref

    waiting = started()
    workers = pool.workers
    blockers = [started() for _ in range(workers)]
    assert pool.workers == workers
    release = threading.Event()
    for blocker in blockers:  # each takes one idle worker: none is left
        blocker.tell(("block", release))

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", no_thread)
        with pytest.raises(RuntimeError, match="can't start new thread"):
            waiting.tell(("add", 1))
    assert pool.workers == workers  # the worker that never started is not counted
    release.set()
    assert state(waiting)[2] == [0, 1]
    # The worker that took the stranded run was promised none: the pool
    # counts it idle once, and is quiet when each worker is.
    assert pool.wait_until_quiet(WAIT)
