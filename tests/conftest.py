"""Shared fixtures: store URLs for every backend, runtimes that always close,
and a check that every test stops the actors it started."""

from __future__ import annotations

import fcntl
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

POSTGRES_ENV = "TURNLOG_TEST_POSTGRES_URL"

# The tests run in several processes at once (pytest-xdist), every one of
# them on the same PostgreSQL server; a test marked ``serial`` restarts that
# server. A lock on this file keeps it alone: tests that use the server hold
# it shared, a serial test holds it exclusive. Across every test process on
# the machine, so another run's restart cannot cut this one's connections.
POSTGRES_LOCK = Path(tempfile.gettempdir()) / "turnlog-tests-postgres.lock"

# This folder goes on sys.path for the helpers tests of several folders
# share (kept_sessions).
sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config: pytest.Config) -> None:
    # Here, not at the top: the import needs this folder on sys.path (above).
    from sqlite_leaks import check_connections_are_closed

    check_connections_are_closed()


def postgres_url() -> str | None:
    """The PostgreSQL server for tests; in CI it must be configured."""
    url = os.environ.get(POSTGRES_ENV)
    if url is None and os.environ.get("CI"):
        pytest.fail(f"{POSTGRES_ENV} must be set in CI: the PostgreSQL tests must run")
    return url


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    base = url.split("?", maxsplit=1)[0]
    with psycopg.connect(base) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )
        conn.commit()


@pytest.fixture(autouse=True)
def _actors_are_stopped() -> Iterator[None]:
    """Fails a test that leaves actors running (and stops them)."""
    yield
    leftover = pykka.ActorRegistry.get_all()
    if leftover:
        pykka.ActorRegistry.stop_all()
        pytest.fail(f"test left {len(leftover)} actors running: {leftover}")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file store."""
    return f"sqlite:///{tmp_path}/turnlog.sqlite3"


@pytest.fixture
def postgres_in_use(request: pytest.FixtureRequest) -> Iterator[None]:
    """Held by a test that uses the PostgreSQL server: shared, so such tests
    run beside each other; exclusive for a ``serial`` test, which so waits
    until no test uses the server and keeps every other one waiting."""
    serial = request.node.get_closest_marker("serial") is not None
    with POSTGRES_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        yield  # closing the file lets the lock go


@pytest.fixture
def postgres_schema_url(postgres_in_use: None) -> Iterator[str]:
    """A fresh PostgreSQL schema, dropped afterwards."""
    url = postgres_url()
    if url is None:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in url else "?"
    yield f"{url}{separator}schema={schema}"
    drop_schema(url, schema)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """Each backend in turn: the SQLite file store and PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("postgres_schema_url"))
