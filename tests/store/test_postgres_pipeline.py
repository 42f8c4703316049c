"""PostgreSQL: statements prepared once a connection, sent in one write
(turnlog.store.postgres_pipeline), and the binary arrays they carry."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.pq import TransactionStatus

from turnlog.store.postgres_pipeline import (
    ARRAY_OF,
    BYTEA,
    FLOAT8,
    INT8,
    TEXT,
    UUID,
    PreparedPipeline,
    Statement,
    array,
    float8_array,
    int8,
    int8_array,
    uuid_array,
)


@pytest.fixture
def conn(postgres_schema_url: str) -> Iterator[psycopg.Connection[Any]]:
    base = postgres_schema_url.split("?", maxsplit=1)[0]
    with psycopg.connect(base, autocommit=True) as conn:
        yield conn


def as_json(pipeline: PreparedPipeline, conn: Any, params: list[Any]) -> list[Any]:
    """Each statement's one text value, read as JSON."""
    return [
        json.loads(result.get_value(0, 0) or b"null")
        for result in pipeline.run(conn, params)
    ]


def prepared(conn: Any) -> set[str]:
    rows = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
    return {row[0] for row in rows if row[0].startswith("turnlog_")}


def test_arrays_reach_the_server_as_their_values(conn: Any) -> None:
    ids = [uuid.uuid4(), uuid.uuid4()]
    pipeline = PreparedPipeline(
        [
            Statement(b"SELECT to_json($1::text[])::text", (ARRAY_OF[TEXT],)),
            Statement(b"SELECT to_json($1::bytea[])::text", (ARRAY_OF[BYTEA],)),
            Statement(b"SELECT to_json($1::bigint[])::text", (ARRAY_OF[INT8],)),
            Statement(b"SELECT to_json($1::float8[])::text", (ARRAY_OF[FLOAT8],)),
            Statement(b"SELECT to_json($1::uuid[])::text", (ARRAY_OF[UUID],)),
            Statement(b"SELECT to_json($1::bigint)::text", (INT8,)),
            Statement(b"SELECT to_json($1::text[])::text", (ARRAY_OF[TEXT],)),
        ]
    )
    texts = ["", "plain", "café ☕", "a\nb"]
    assert as_json(
        pipeline,
        conn,
        [
            [array(TEXT, [text.encode() for text in texts])],
            [array(BYTEA, [b"", b"\x00\xff", b"x" * 300])],
            [int8_array([0, -1, 2**63 - 1, -(2**63)])],
            [float8_array([0.5, -1e300, 1.0])],
            [uuid_array(ids)],
            [int8(-42)],
            [array(TEXT, [])],
        ],
    ) == [
        texts,
        ["\\x", "\\x00ff", "\\x" + "78" * 300],
        [0, -1, 2**63 - 1, -(2**63)],
        [0.5, -1e300, 1.0],
        [str(id_) for id_ in ids],
        -42,
        [],
    ]


def test_each_connection_prepares_once(conn: Any, postgres_schema_url: str) -> None:
    pipeline = PreparedPipeline(
        [Statement(b"SELECT to_json($1::bigint)::text", (INT8,))]
    )
    assert as_json(pipeline, conn, [[int8(1)]]) == [1]
    names = prepared(conn)
    assert len(names) == 1
    assert as_json(pipeline, conn, [[int8(2)]]) == [2]
    assert prepared(conn) == names
    base = postgres_schema_url.split("?", maxsplit=1)[0]
    with psycopg.connect(base, autocommit=True) as other:
        assert as_json(pipeline, other, [[int8(3)]]) == [3]
        assert len(prepared(other)) == 1


def test_statements_dropped_behind_its_back_are_prepared_again(conn: Any) -> None:
    pipeline = PreparedPipeline(
        [
            Statement(b"BEGIN"),
            Statement(b"SELECT to_json($1::bigint)::text", (INT8,)),
            Statement(b"COMMIT"),
        ]
    )
    pipeline.run(conn, [None, [int8(1)], None])
    # As psycopg does on some rollbacks of its own.
    conn.execute("DEALLOCATE ALL")
    results = pipeline.run(conn, [None, [int8(2)], None])
    assert results[1].get_value(0, 0) == b"2"
    assert len(prepared(conn)) == 3
    assert conn.info.transaction_status == TransactionStatus.IDLE


def test_a_failed_statement_raises_rolled_back_and_keeps_the_statements(
    conn: Any,
) -> None:
    conn.execute("CREATE TEMPORARY TABLE seen (n bigint)")
    pipeline = PreparedPipeline(
        [
            Statement(b"BEGIN"),
            Statement(b"INSERT INTO seen VALUES ($1::bigint)", (INT8,)),
            Statement(b"SELECT 1 / $1::bigint", (INT8,)),
            Statement(b"COMMIT"),
        ]
    )
    with pytest.raises(errors.DivisionByZero):
        pipeline.run(conn, [None, [int8(1)], [int8(0)], None])
    assert conn.info.transaction_status == TransactionStatus.IDLE
    assert conn.execute("SELECT count(*) FROM seen").fetchone() == (0,)
    # The server skipped what followed the failure, the COMMIT's Parse too.
    names = prepared(conn)
    assert len(names) == 3
    pipeline.run(conn, [None, [int8(2)], [int8(1)], None])
    assert conn.execute("SELECT n FROM seen").fetchall() == [(2,)]
    assert names < prepared(conn)
    assert len(prepared(conn)) == 4
