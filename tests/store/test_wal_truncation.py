"""A truncation of the WAL holds this process's new transactions back.

SQLite's truncating checkpoint waits for the file's readers and for its
write lock by polling. Readers that start meanwhile may share an older
snapshot's read mark, which the checkpoint cannot get past, and writers
committing back to back can keep the write lock from it: on a loaded
machine either one stalled a truncation, and every save with it, for its
whole wait. So while the keeper truncates, this process's readers of the
file (through any of its stores) and its writers wait.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
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


def _keeper(store: Store) -> WalKeeper:
    keeper: WalKeeper | None = store.datastore.pool.wal
    assert keeper is not None
    return keeper


def _grow_wal(store: Store, path: Path, past: int) -> int:
    """Saves sessions until the WAL is larger than ``past`` bytes; how many."""
    number = 0
    while _wal_size(path) <= past:
        store.save(_padded_session(f"s{number}"))
        number += 1
    return number


class _OnTruncate:
    """An SQLite connection that runs ``check`` as a TRUNCATE checkpoint starts."""

    def __init__(self, connection: sqlite3.Connection, check: Any) -> None:
        self._connection = connection
        self._check = check

    def execute(self, sql: str) -> sqlite3.Cursor:
        if "TRUNCATE" in sql:
            self._check()
        return self._connection.execute(sql)


def _truncate(
    store: Store, path: Path, monkeypatch: pytest.MonkeyPatch, check: Any
) -> int:
    """Grows the WAL past a lowered bound and has the keeper truncate it,
    ``check`` run as the TRUNCATE starts; how many sessions were saved."""
    saved = _grow_wal(store, path, past=64 * 1024)
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", 16 * 1024)
    checkpoint = sqlite3.connect(path, isolation_level=None)
    try:
        _keeper(store)._checkpoint(_OnTruncate(checkpoint, check))  # type: ignore[arg-type]
    finally:
        checkpoint.close()
    return saved


@pytest.fixture
def quiet_keeper(monkeypatch: pytest.MonkeyPatch) -> None:
    """No checkpoint comes due on its own: the test runs the one it needs."""
    monkeypatch.setattr(turnlog.store.wal, "CHECKPOINT_PAGES", 10**9)
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", 10**9)


@pytest.mark.usefixtures("quiet_keeper")
def test_a_truncation_holds_writers_and_readers_back_and_empties_the_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    other = Store(f"sqlite:///{path}")  # another store of this process, reading
    read: list[int] = []
    readers: list[threading.Thread] = []
    seen: dict[str, bool] = {}

    def during_truncation() -> None:
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
        saved = _truncate(store, path, monkeypatch, during_truncation)
        readers[0].join(10)
        assert seen == {"writers held": True, "a new reader waits": True}
        assert read == [min(5, saved)]  # once the truncation was over
        assert _wal_size(path) == 0
        store.save(_padded_session("after"))  # the writer's turn was given back
    finally:
        other.close()
        store.close()


@pytest.mark.usefixtures("quiet_keeper")
def test_a_failed_truncation_lets_writers_and_readers_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")

    def fail() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    try:
        with pytest.raises(sqlite3.OperationalError):
            _truncate(store, path, monkeypatch, fail)
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


FORKED_MID_TRUNCATION = """
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
with store.datastore.pool.wal.gate.closed():  # as if forked mid-truncation
    pid = os.fork()
    if pid == 0:
        # No keeper truncates in the child: its reads go on.
        os._exit(0 if child_reads() else 1)
    _, status = os.waitpid(pid, 0)
store.close()
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_child_forked_mid_truncation_reads(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", FORKED_MID_TRUNCATION],
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
