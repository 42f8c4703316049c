"""PostgreSQL that cannot be reached, or refuses: the server's own reason.

And schema names in the URL, checked before any SQL runs.
"""

from __future__ import annotations

import socket
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

from turnlog import Runtime
from turnlog.cli.main import main
from turnlog.domain.errors import StoreError, StoreURLError
from turnlog.store.log import Store
from turnlog.store.opening import parse_store_url


@pytest.fixture
def base(postgres_schema_url: str) -> str:
    """The test server's URL, without the schema made for the test."""
    return postgres_schema_url.split("?", maxsplit=1)[0]


def _with(
    url: str,
    *,
    user: str | None = None,
    host: str | None = None,
    port: int | None = None,
    database: str | None = None,
) -> str:
    parts = urlsplit(url)
    address = f"{host or parts.hostname}:{port or parts.port or 5432}"
    netloc = f"{user or parts.username}@{address}"
    path = f"/{database}" if database else parts.path
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cases(base: str) -> dict[str, tuple[str, str]]:
    """name: (URL, what the reason must say)."""
    role, database = f"nobody_{uuid.uuid4().hex[:8]}", f"x_{uuid.uuid4().hex[:8]}"
    return {
        "down": (
            _with(base, host="127.0.0.1", port=_unused_port()),
            "Connection refused",
        ),
        "user": (_with(base, user=role), f'role "{role}" does not exist'),
        "database": (
            _with(base, database=database),
            f'database "{database}" does not exist',
        ),
        "host": (_with(base, host="turnlog-test.invalid"), "turnlog-test.invalid"),
    }


CASES = ["down", "user", "database", "host"]


@pytest.mark.parametrize("case", CASES)
def test_runtime_open_gives_the_reason(base: str, case: str) -> None:
    url, reason = _cases(base)[case]

    with pytest.raises(StoreError) as raised:
        Runtime.open(url)

    assert reason in str(raised.value)
    assert "cannot connect to the log at" in str(raised.value)


@pytest.mark.parametrize("case", CASES)
def test_the_cli_gives_the_reason_in_one_line(
    base: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url, reason = _cases(base)[case]

    code = main(["--store", url, "sessions"])
    out, err = capsys.readouterr()

    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("turnlog: error: cannot connect to the log at ")
    assert reason in lines[0]


BAD_SCHEMAS = ["bad;drop", 'a"b', "1starts_with_a_digit", "has-dash", "x" * 64, "é"]


@pytest.mark.parametrize("schema", BAD_SCHEMAS)
def test_a_schema_name_that_is_no_identifier_is_refused_at_parsing(
    schema: str,
) -> None:
    with pytest.raises(StoreURLError, match="schema name") as raised:
        parse_store_url(f"postgresql://u@h/db?schema={schema}")
    assert repr(schema) in str(raised.value)


def test_two_schemas_are_refused() -> None:
    with pytest.raises(StoreURLError, match="more than one schema"):
        parse_store_url("postgresql://u@h/db?schema=a&schema=b")


def test_plain_schema_names_pass() -> None:
    for schema in ("tenant_1", "_x", "A" * 63):
        env = parse_store_url(f"postgresql://u@h/db?schema={schema}")
        assert env["POSTGRES_SCHEMA"] == schema


@pytest.mark.parametrize("schema", ["bad;drop", 'a"b'])
def test_a_bad_schema_creates_nothing(base: str, schema: str) -> None:
    import psycopg

    with pytest.raises(StoreURLError):
        Store(f"{base}?schema={schema}")

    with psycopg.connect(base) as connection:
        found = connection.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s",
            (schema,),
        ).fetchone()
    assert found == (0,)
