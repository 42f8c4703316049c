"""A save on SQLite reuses the connection used last, whose page cache is warm."""

from __future__ import annotations

from pathlib import Path

from turnlog.store.log import Store


def test_the_connection_returned_last_is_handed_out_first(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'log.sqlite3'}")
    try:
        pool = store.datastore.pool
        first = pool.get_connection(is_writer=False)
        second = pool.get_connection(is_writer=False)
        pool.put_connection(first)
        pool.put_connection(second)
        # eventsourcing's own order would give ``first`` (the one idle
        # longest), whose cache another connection's writes have made stale.
        again = pool.get_connection(is_writer=True)
        assert again is second
        pool.put_connection(again)
        again = pool.get_connection(is_writer=True)
        assert again is second
        pool.put_connection(again)
    finally:
        store.close()
