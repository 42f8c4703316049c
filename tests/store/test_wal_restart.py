"""A restart of the WAL holds this process's new transactions back, and
the commits after it write over the WAL's blocks.

SQLite's restarting checkpoint waits for the file's readers and for its
write lock by polling. Readers that start meanwhile may share an older
snapshot's read mark, which the checkpoint cannot get past, and writers
committing back to back can keep the write lock from it: on a loaded
machine either one stalled a checkpoint, and every save with it, for its
whole wait. So while the keeper restarts the WAL, this process's readers
of the file (through any of its stores) and its writers wait.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import ConnectionUnavailableError

import turnlog.store.wal
from turnlog.domain.session import Session
from turnlog.store.log import Store
from turnlog.store.wal import WalKeeper, read_gate

PAD = "p" * 4000


def _padded_session(session_id: str) -> Session:
    return Session.create(
        session_id,
        agent_name="a",
        agent_digest="d",
        shared_state={"pad": PAD},
        model_route="default",
    )


def _wal_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def _frames(path: Path) -> int:
    """The frames the WAL holds since it last started over."""
    with closing(sqlite3.connect(path)) as connection:
        return int(connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])


def _keeper(store: Store) -> WalKeeper:
    keeper: WalKeeper | None = store.datastore.pool.wal
    assert keeper is not None
    return keeper


def _quiet(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """No checkpoint comes due on its own: the test runs the ones it needs."""
    monkeypatch.setattr(_keeper(store), "committed", lambda size: None)


def _grow_wal(store: Store, path: Path, past: int, first: int = 0) -> int:
    """Saves sessions until the WAL is larger than ``past`` bytes; how many."""
    number = first
    while _wal_size(path) <= past:
        store.save(_padded_session(f"s{number}"))
        number += 1
    return number - first


class _Watched:
    """An SQLite connection that runs ``check`` as a RESTART checkpoint
    starts, and counts them."""

    def __init__(self, connection: sqlite3.Connection, check: Any = None) -> None:
        self._connection = connection
        self._check = check
        self.restarts = 0

    def execute(self, sql: str) -> sqlite3.Cursor:
        if "RESTART" in sql:
            self.restarts += 1
            if self._check is not None:
                self._check()
        return self._connection.execute(sql)


def _checkpoint(store: Store, path: Path, check: Any = None) -> _Watched:
    """Has the keeper checkpoint once, ``check`` run as a restart starts."""
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        watched = _Watched(connection, check)
        _keeper(store)._checkpoint(watched)  # type: ignore[arg-type]
    return watched


def _restart(
    store: Store, path: Path, monkeypatch: pytest.MonkeyPatch, check: Any
) -> int:
    """Grows the WAL past a lowered bound and has the keeper restart it,
    ``check`` run as the restart starts; how many sessions were saved."""
    saved = _grow_wal(store, path, past=64 * 1024)
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", 16 * 1024)
    assert _checkpoint(store, path, check).restarts == 1
    return saved


def test_a_restart_holds_writers_and_readers_back_and_starts_the_wal_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    _quiet(store, monkeypatch)
    other = Store(f"sqlite:///{path}")  # another store of this process, reading
    read: list[int] = []
    readers: list[threading.Thread] = []
    seen: dict[str, bool] = {}

    def during_restart() -> None:
        # This thread holds the writer's turn, so no writer gets it.
        with pytest.raises(ConnectionUnavailableError):
            store.datastore.pool.get_connection(timeout=0.05, is_writer=True)
        seen["writers held"] = True
        reader = threading.Thread(
            target=lambda: read.append(len(other.notifications(1, 5)))
        )
        reader.start()
        readers.append(reader)
        reader.join(0.2)
        seen["a new reader waits"] = reader.is_alive()

    try:
        saved = _restart(store, path, monkeypatch, during_restart)
        readers[0].join(10)
        assert seen == {"writers held": True, "a new reader waits": True}
        assert read == [min(5, saved)]  # once the restart was over
        grown, frames = _wal_size(path), _frames(path)
        store.save(_padded_session("after"))  # the writer's turn was given back
        # The save wrote from the WAL's start, over blocks the file has.
        assert _wal_size(path) == grown
        assert _frames(path) < 10 < frames
    finally:
        other.close()
        store.close()


def test_a_restart_waits_for_a_reader_of_the_wal_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader outside the gate (another process's, say) that read from the
    # WAL when the restart began would keep the next commit from starting
    # the WAL over; a checkpoint that did not wait for it would leave the
    # commits appending.
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_WAIT", 30.0)
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    _quiet(store, monkeypatch)
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    ended = threading.Event()

    def end_the_read_soon() -> None:
        # Ends the read while the restart waits for it. The test passes
        # however late that comes (the restart waits up to 30 s); the delay
        # only lets a checkpoint that did not wait be caught, the save after
        # it then finding the reader still there.
        def end() -> None:
            reader.execute("COMMIT")
            ended.set()

        threading.Timer(0.1, end).start()

    try:
        _grow_wal(store, path, past=64 * 1024)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM stored_events").fetchone()
        monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", 16 * 1024)
        assert _checkpoint(store, path, end_the_read_soon).restarts == 1
        assert ended.is_set()
        store.save(_padded_session("after"))
        assert _frames(path) < 10
    finally:
        assert ended.wait(10)
        reader.close()
        store.close()


def test_a_wal_past_its_bound_is_trimmed_once_it_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 64 * 1024
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", bound)
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    _quiet(store, monkeypatch)
    try:
        _grow_wal(store, path, past=4 * bound)
        assert _checkpoint(store, path).restarts == 1
        store.save(_padded_session("after"))
        assert _wal_size(path) == turnlog.store.wal.wal_file_limit()
    finally:
        store.close()


def test_a_restart_readers_hold_off_is_tried_again_a_bound_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 64 * 1024
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_WAIT", 0.05)
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    _quiet(store, monkeypatch)
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", bound)
    try:
        saved = _grow_wal(store, path, past=bound // 2)
        # A reader outside the gate keeps an old snapshot of the WAL's.
        with closing(sqlite3.connect(path, isolation_level=None)) as reader:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM stored_events").fetchone()
            saved += _grow_wal(store, path, past=bound, first=saved)
            assert _checkpoint(store, path).restarts == 1  # held off
            saved += _grow_wal(store, path, past=_wal_size(path), first=saved)
            assert _checkpoint(store, path).restarts == 0  # not at once again
            reader.execute("COMMIT")
        _grow_wal(store, path, past=_wal_size(path) + bound, first=saved)
        assert _checkpoint(store, path).restarts == 1
        store.save(_padded_session("after"))
        assert _frames(path) < 10
    finally:
        store.close()


def test_a_failed_restart_lets_writers_and_readers_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    _quiet(store, monkeypatch)

    def fail() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    try:
        with pytest.raises(sqlite3.OperationalError):
            _restart(store, path, monkeypatch, fail)
        done = threading.Event()

        def read_and_write() -> None:
            store.notifications(1, 5)
            store.save(_padded_session("after"))
            done.set()

        threading.Thread(target=read_and_write, daemon=True).start()
        assert done.wait(10)
    finally:
        store.close()


def test_every_store_on_one_file_shares_its_gate(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    gate = read_gate(str(tmp_path / "a" / "log.sqlite3"))
    assert read_gate(str(tmp_path / "link" / "log.sqlite3")) is gate
    assert read_gate(str(tmp_path / "a" / "other.sqlite3")) is not gate
    store = Store(f"sqlite:///{tmp_path / 'link' / 'log.sqlite3'}")
    try:
        assert _keeper(store).gate is gate
    finally:
        store.close()


def test_a_closed_gate_holds_readers_until_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    store.save(_padded_session("s"))
    read: list[int] = []
    reader = threading.Thread(
        target=lambda: read.append(len(store.notifications(1, 5)))
    )
    try:
        with _keeper(store).gate.closed():
            reader.start()
            reader.join(0.2)
            assert reader.is_alive()
            assert read == []
        reader.join(10)
        assert read == [1]
        store.save(_padded_session("t"))
    finally:
        store.close()


def test_the_gate_stays_closed_until_every_restart_that_closed_it_is_over(
    tmp_path: Path,
) -> None:
    # Two stores of this process on one file, each with a keeper, share
    # the gate: the first restart to end must not let readers in while
    # the other still runs.
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    store.save(_padded_session("s"))
    gate = _keeper(store).gate
    read: list[int] = []
    reader = threading.Thread(
        target=lambda: read.append(len(store.notifications(1, 5)))
    )
    try:
        with gate.closed():
            with gate.closed():
                reader.start()
            reader.join(0.2)
            assert reader.is_alive()  # the outer restart is still under way
        reader.join(10)
        assert read == [1]
    finally:
        store.close()


FORKED_MID_RESTART = """
import os, sys, threading
from turnlog.store.log import Store


def child_reads():
    read = []
    reader = threading.Thread(
        target=lambda: read.append(Store("sqlite:///log.sqlite3").notifications(1, 5)),
        daemon=True,
    )
    reader.start()
    reader.join(10)
    return read == [[]]


store = Store("sqlite:///log.sqlite3")
with store.datastore.pool.wal.gate.closed():  # as if forked mid-restart
    pid = os.fork()
    if pid == 0:
        # No keeper restarts in the child: its reads go on.
        os._exit(0 if child_reads() else 1)
    _, status = os.waitpid(pid, 0)
store.close()
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_child_forked_mid_restart_reads(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", FORKED_MID_RESTART],
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
