"""Shared fixtures: store URLs for every backend, runtimes that always close,
and a check that every test stops the actors it started."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

POSTGRES_ENV = "TURNLOG_TEST_POSTGRES_URL"

# This folder goes on sys.path for the helpers tests of several folders
# share (kept_sessions).
sys.path.insert(0, str(Path(__file__).parent))


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
def postgres_schema_url() -> Iterator[str]:
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
