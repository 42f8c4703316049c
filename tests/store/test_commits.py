"""The one follower of the log's commits: who is woken, when, at what cost.

``CommitWatch`` is driven here by a fake backend and a fake log end, so
every commit and every NOTIFY happens exactly when the test says.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.projections.follower import SessionFollower
from turnlog.store import commits
from turnlog.store.commits import Commit, CommitWatch
from turnlog.store.fencing import LEASE_TABLE
from turnlog.store.log import Store
from turnlog.store.postgres_insert import OneRoundTripInsert

WAIT = 10.0


class Ears:
    """A backend that hears commits when the test calls :meth:`notify`."""

    def __init__(self) -> None:
        self._wake: Callable[[], None] | None = None
        self.listening = threading.Event()

    def listen_for_commits(
        self, wake: Callable[[], None], stopping: threading.Event
    ) -> bool:
        self._wake = wake
        wake()  # as PostgreSQL's: whatever came before the LISTEN
        self.listening.set()
        stopping.wait()
        return True

    def notify(self) -> None:
        assert self._wake is not None
        self._wake()


class Deaf:
    """A backend that cannot hear other processes' commits (SQLite)."""

    def listen_for_commits(
        self, wake: Callable[[], None], stopping: threading.Event
    ) -> bool:
        return False


class LogEnd:
    """The log's newest position, moved by the test."""

    def __init__(self, newest: int) -> None:
        self.newest = newest
        self.looks: queue.Queue[int] = queue.Queue()

    def __call__(self) -> int:
        self.looks.put(self.newest)
        return self.newest

    def looked(self, times: int) -> None:
        """Waits until the watch has looked ``times`` times (more) at the end."""
        for _ in range(times):
            self.looks.get(timeout=WAIT)


def saved(session_id: str, position: int) -> SimpleNamespace:
    """What the Store's listener is given for one saved event."""
    return SimpleNamespace(
        domain_event=SimpleNamespace(session_id=session_id),
        notification=SimpleNamespace(id=position),
    )


@pytest.fixture
def heard() -> queue.Queue[Commit]:
    return queue.Queue()


@pytest.fixture
def listening(
    heard: queue.Queue[Commit],
) -> Iterator[tuple[Ears, LogEnd, CommitWatch]]:
    """A watch that hears NOTIFY, past its start, the log ending at 10."""
    ears, log = Ears(), LogEnd(10)
    watch = CommitWatch(ears, log)
    watch.add_waker(heard.put)
    try:
        assert ears.listening.wait(WAIT)
        log.looked(2)  # when it started, and when it began to listen
        yield ears, log, watch
    finally:
        watch.close()


def test_a_save_here_names_its_session(heard: queue.Queue[Commit]) -> None:
    watch = CommitWatch(Deaf(), LogEnd(10))
    watch.add_waker(heard.put)
    try:
        watch.bump([saved("s", 11), saved("s", 12)])
        assert heard.get(timeout=WAIT) == Commit(frozenset({"s"}))
    finally:
        watch.close()


def test_growth_on_sqlite_is_found_by_the_watch_alone(
    heard: queue.Queue[Commit],
) -> None:
    log = LogEnd(10)
    watch = CommitWatch(Deaf(), log)
    watch.add_waker(heard.put)
    try:
        seen = watch.count()
        log.newest = 11  # another process committed
        assert heard.get(timeout=WAIT) == Commit(None)
        assert watch.wait(seen, timeout=WAIT) > seen
        assert not watch.hears_other_processes
    finally:
        watch.close()


def test_another_process_commit_is_not_hidden_by_a_later_one_of_ours(
    heard: queue.Queue[Commit],
    listening: tuple[Ears, LogEnd, CommitWatch],
) -> None:
    # The SSE tail compared the log's end only with the newest position it
    # saved itself: a commit of another process at 11, then one of ours at
    # 12, looked like ours alone, and the other session's readers slept on.
    ears, log, watch = listening
    assert watch.hears_other_processes
    log.newest = 11  # another process's commit
    log.newest = 12
    watch.bump([saved("mine", 12)])  # then ours
    assert heard.get(timeout=WAIT) == Commit(frozenset({"mine"}))
    ears.notify()
    assert heard.get(timeout=WAIT) == Commit(None)


def test_a_notify_of_our_own_commit_wakes_no_other_session(
    heard: queue.Queue[Commit],
    listening: tuple[Ears, LogEnd, CommitWatch],
) -> None:
    ears, log, watch = listening
    log.newest = 11
    watch.bump([saved("mine", 11)])
    ears.notify()  # PostgreSQL tells every listener, us too
    log.newest = 12  # then another process commits
    ears.notify()
    assert [heard.get(timeout=WAIT) for _ in range(2)] == [
        Commit(frozenset({"mine"})),
        Commit(None),
    ]
    watch.close()
    # close wakes everyone once; nothing came in between
    assert heard.get(timeout=WAIT) == Commit(None)
    assert heard.empty()


def test_a_listening_watch_keeps_a_bounded_record_of_its_own_commits(
    listening: tuple[Ears, LogEnd, CommitWatch],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Where no other process commits, no NOTIFY of theirs makes the watch
    # look: the positions of its own commits, kept until a look, must not
    # pile up for as long as the process lives.
    monkeypatch.setattr(commits, "LOCAL_LIMIT", 100)
    _ears, log, watch = listening
    for position in range(11, 311):
        log.newest = position
        watch.bump([saved("mine", position)])
    # They made it look, with no NOTIFY (a look forgets what it saw).
    log.looked(1)


def test_an_idle_follower_does_not_read_the_log_again(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Followers used to re-read the log every half second each; now only
    # the store's watch looks at the log's end, and they read when it moved.
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["hi"])), session_id="s"
        )
        session.prompt("hello", timeout=WAIT)
    store = Store(sqlite_url)
    reads: list[int] = []
    original = store.notifications

    def counted(start: int, limit: int, topics=()):
        reads.append(start)
        return original(start, limit, topics)

    monkeypatch.setattr(store, "notifications", counted)
    try:
        follower = SessionFollower(store, "s")
        while True:  # the history, read when it opened
            try:
                follower.get(timeout=0)
            except TimeoutError:
                break
        before = len(reads)
        with pytest.raises(TimeoutError):
            follower.get(timeout=3 * commits.POLL_INTERVAL + 0.5)
        # One read before it waits, one when its time is up: none in between.
        assert len(reads) - before == 2
    finally:
        follower.close()
        store.close()


def test_a_follower_wakes_on_another_process_commit_without_a_poll(
    postgres_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On PostgreSQL a NOTIFY wakes the follower: no poll interval to wait.
    monkeypatch.setattr(commits, "POLL_INTERVAL", 3600.0)
    url = postgres_schema_url
    with Runtime.open(url) as writer, Runtime.open(url) as reader:
        session = writer.create_session(
            Agent("a", model=ScriptedModel(["one", "two"])), session_id="s"
        )
        session.prompt("first", timeout=WAIT)
        with reader.follow("s") as follower:
            while True:
                try:
                    follower.get(timeout=0)
                except TimeoutError:
                    break
            done = threading.Event()
            threading.Thread(
                target=lambda: (session.prompt("second", timeout=WAIT), done.set()),
                daemon=True,
            ).start()
            event = follower.get(timeout=WAIT)
            assert event.sequence > 0
        assert done.wait(WAIT)


def _listen_apart(
    ours: Store, theirs: Store
) -> tuple[queue.Queue[str], threading.Event, threading.Thread]:
    """Starts ``ours``'s NOTIFY listener on a channel of the test's own.

    Every schema's inserts NOTIFY the same channel (it is named after the
    events table): on a channel of this test's own, other tests' saves in
    this database do not wake the listener. Returns where it reports its
    wake-ups, what stops it, and its thread.
    """
    channel = f"test_{uuid.uuid4().hex}"
    for store in (ours, theirs):
        recorder: Any = store.backend
        recorder.channel_name = channel
        recorder.insert = OneRoundTripInsert(
            schema=recorder.datastore.schema,
            events_table=recorder.events_table_name,
            lease_table=LEASE_TABLE,
            id_type=recorder.datastore.originator_id_type,
            lock_table_statements=recorder.lock_table_statements,
            channel=channel,
        )
    wakes: queue.Queue[str] = queue.Queue()
    stopping = threading.Event()
    listener = threading.Thread(
        target=ours.backend.listen_for_commits,
        args=(lambda: wakes.put("woken"), stopping),
    )
    listener.start()
    return wakes, stopping, listener


def test_postgres_passes_on_only_other_stores_notifies(
    postgres_schema_url: str,
) -> None:
    # Our own saves tell the watch themselves: a look at the log's end for
    # their NOTIFY too would cost a query and two thread wake-ups a commit.
    from store_support import new_session

    ours, theirs = Store(postgres_schema_url), Store(postgres_schema_url)
    wakes, stopping, listener = _listen_apart(ours, theirs)
    try:
        assert wakes.get(timeout=WAIT) == "woken"  # on LISTEN, for what came before
        for n in range(3):
            ours.save(new_session(f"mine{n}"))
        for n in range(2):
            theirs.save(new_session(f"theirs{n}"))
            assert wakes.get(timeout=WAIT) == "woken"
        # NOTIFYs come in commit order: the second of theirs was the last.
        stopping.set()
        listener.join(WAIT)
        assert wakes.empty()
    finally:
        stopping.set()
        listener.join(WAIT)
        ours.close()
        theirs.close()


def test_postgres_listener_reads_its_own_notifies_in_bursts(
    postgres_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each of our own NOTIFYs woke the listener's thread; after one that
    # brings only ours, close behind another, it rests, and the NOTIFYs of
    # the commits meanwhile are read in one wake-up. Another store's still
    # wakes the watch.
    import select

    from store_support import new_session

    import turnlog.store.postgres

    monkeypatch.setattr(turnlog.store.postgres, "OWN_NOTIFY_NAP", 1.0)
    ready: list[int] = []

    class CountingPoll:
        def __init__(self) -> None:
            self._poll = select.poll()

        def register(self, fd: int, mask: int) -> None:
            self._poll.register(fd, mask)

        def poll(self, timeout: int) -> list[tuple[int, int]]:
            events = self._poll.poll(timeout)
            if events:
                ready.append(len(events))
            return events

    class Select:
        POLLIN = select.POLLIN
        poll = CountingPoll

    monkeypatch.setattr(turnlog.store.postgres, "select", Select)
    ours, theirs = Store(postgres_schema_url), Store(postgres_schema_url)
    wakes, stopping, listener = _listen_apart(ours, theirs)
    try:
        assert wakes.get(timeout=WAIT) == "woken"  # on LISTEN
        for n in range(20):
            ours.save(new_session(f"mine{n}"))
        theirs.save(new_session("theirs"))
        assert wakes.get(timeout=WAIT) == "woken"
    finally:
        stopping.set()
        listener.join(WAIT)
        ours.close()
        theirs.close()
    # 21 NOTIFYs: one wake-up each before; a few now (each rest is 1 s,
    # the 20 saves a few milliseconds each).
    assert len(ready) <= 6, ready


def test_postgres_listener_raises_when_its_connection_is_cut(
    postgres_schema_url: str,
) -> None:
    # The watch listens again when the listener raises; a listener that
    # returned, or waited on, would leave it deaf to other processes.
    import psycopg

    store = Store(postgres_schema_url)
    backend: Any = store.backend
    connect = backend._connect
    pids: list[int] = []

    def connect_and_note() -> Any:
        conn = connect()
        pids.append(conn.info.backend_pid)
        return conn

    backend._connect = connect_and_note
    failed: queue.Queue[BaseException] = queue.Queue()
    listening = threading.Event()
    stopping = threading.Event()

    def listen() -> None:
        try:
            backend.listen_for_commits(listening.set, stopping)
        except BaseException as error:  # the verdict, whatever it is
            failed.put(error)

    listener = threading.Thread(target=listen)
    listener.start()
    try:
        assert listening.wait(WAIT)
        base = postgres_schema_url.split("?", maxsplit=1)[0]
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pids[0],))
        assert isinstance(failed.get(timeout=WAIT), psycopg.OperationalError)
    finally:
        stopping.set()
        listener.join(WAIT)
        store.close()


def test_an_import_wakes_the_watch(store_url: str) -> None:
    from store_support import new_session

    store = Store(store_url)
    try:
        heard: queue.Queue[Commit] = queue.Queue()
        store.commits.add_waker(heard.put)
        session = new_session("imported")
        store.insert_stored(
            [store._mapper.to_stored_event(e) for e in session.collect_events()]
        )
        # Told on this thread, before insert_stored returns: PostgreSQL's
        # NOTIFY of it wakes nobody (it is this store's own).
        assert heard.get_nowait() == Commit(None)
    finally:
        store.close()
