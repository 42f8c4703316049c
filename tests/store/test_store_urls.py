"""Store URLs: one URL picks the backend; a bad one is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnlog.domain.errors import StoreURLError
from turnlog.store.log import Store
from turnlog.store.opening import DEFAULT_SQLITE_PATH, parse_store_url


def test_no_url_means_the_embedded_sqlite_file_under_the_working_dir(
    tmp_path: Path,
) -> None:
    env = parse_store_url(None, cwd=tmp_path)
    assert env["PERSISTENCE_MODULE"] == "eventsourcing.sqlite"
    assert env["SQLITE_DBNAME"] == str(tmp_path / DEFAULT_SQLITE_PATH)


def test_sqlite_urls_follow_the_three_and_four_slash_convention(tmp_path: Path) -> None:
    assert parse_store_url("sqlite:///rel/log.db", cwd=tmp_path)[
        "SQLITE_DBNAME"
    ] == str(tmp_path / "rel" / "log.db")
    assert parse_store_url("sqlite:////abs/log.db")["SQLITE_DBNAME"] == "/abs/log.db"


def test_postgres_urls_carry_host_port_database_and_schema() -> None:
    env = parse_store_url("postgresql://bob:pw@db.local:6543/app?schema=tenant_1")
    assert (env["POSTGRES_HOST"], env["POSTGRES_PORT"], env["POSTGRES_DBNAME"]) == (
        "db.local",
        "6543",
        "app",
    )
    assert (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]) == ("bob", "pw")
    assert env["POSTGRES_SCHEMA"] == "tenant_1"
    no_create = parse_store_url("postgresql://h/db?create_tables=no")
    assert no_create["CREATE_TABLE"] == "no"


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("ftp://example.com/x", "unsupported store URL scheme"),
        ("just-a-path.sqlite3", "no scheme"),
        ("sqlite://relative.db", "sqlite:///relative/path"),
        ("memory://something", "memory:// takes nothing"),
        ("postgresql://hostonly", "must name a host and a database"),
        ("postgresql://h:notaport/db", "bad port"),
        ("postgresql://h/db?colour=blue", "unknown PostgreSQL URL parameters"),
    ],
)
def test_bad_urls_are_refused_before_anything_is_written(
    url: str, complaint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreURLError, match=complaint):
        Store(url)
    assert list(tmp_path.iterdir()) == []


def test_memory_stores_are_private_to_each_store() -> None:
    from turnlog.domain.session import Session

    first, second = Store("memory://"), Store("memory://")
    try:
        first.save(
            Session.create(
                "s", agent_name="a", agent_digest="d", shared_state={}, model_route="r"
            )
        )
        assert first.max_position() == 1
        assert second.max_position() == 0
    finally:
        first.close()
        second.close()
