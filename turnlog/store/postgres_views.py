"""PostgreSQL: a views' commit in one round trip, through the prepared pipeline.

The view runner commits every view of a batch at once: each view's
tracking row moves from where it was read (a compare-and-set), and its
documents are written. Through psycopg's cursors that was a BEGIN, two
statements a view and a COMMIT, each a round trip and a pass through
psycopg's Python query machinery, with the documents adapted as text
arrays element by element. Here the whole transaction is four
statements sent in one write (turnlog.store.postgres_pipeline), the
parameters column arrays in binary:

    BEGIN
    one UPDATE of every view's tracking row, from an array of
        (view, from, to, generation); unless it moved every one of them,
        its result fails a cast, which aborts the transaction
    one INSERT ... ON CONFLICT of every view's documents
    COMMIT

A moved tracking row fails the pipeline at the UPDATE, so the server
skips the documents and the COMMIT, and the transaction is rolled back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import DataError
from psycopg import Connection
from psycopg.errors import InvalidTextRepresentation
from psycopg.sql import SQL, Identifier, Literal

from turnlog.store.backend import ViewWrite
from turnlog.store.log_tables import DOCS_TABLE, TRACKING_TABLE
from turnlog.store.postgres_pipeline import (
    ARRAY_OF,
    BYTEA,
    INT8,
    TEXT,
    PreparedPipeline,
    Statement,
    array,
    int8,
    int8_array,
)

MOVED = "turnlog views: a tracking row moved"
"""The text the tracking statement fails to cast when a row had moved."""


class OneRoundTripViews:
    """The statements of a views' commit, and how they are sent."""

    def __init__(self, schema: str) -> None:
        tracking = SQL("{0}.{1}").format(Identifier(schema), Identifier(TRACKING_TABLE))
        docs = SQL("{0}.{1}").format(Identifier(schema), Identifier(DOCS_TABLE))
        # The UPDATE runs once, whatever the SELECT reads of it; its rows
        # counted, a shortfall fails the cast (and so the transaction).
        advance = (
            SQL(
                "WITH moved AS (UPDATE {0} AS tracking SET position = advance.upto "
                "FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) "
                "AS advance (name, since, upto, generation) "
                "WHERE tracking.view = advance.name "
                "AND tracking.position = advance.since "
                "AND tracking.generation = advance.generation "
                "RETURNING tracking.view) "
                "SELECT CAST(CASE WHEN count(*) = $5::bigint THEN '1' ELSE {1} END "
                "AS integer) FROM moved"
            )
            .format(tracking, Literal(MOVED))
            .as_bytes()
        )
        upsert = (
            SQL(
                "INSERT INTO {0} (gen, part, pos, doc) SELECT * FROM "
                "unnest($1::bigint[], $2::text[], $3::bigint[], $4::bytea[]) "
                "ON CONFLICT (gen, part, pos) DO UPDATE SET doc = excluded.doc"
            )
            .format(docs)
            .as_bytes()
        )
        self._pipeline = PreparedPipeline(
            [
                Statement(b"BEGIN"),
                Statement(
                    advance,
                    (
                        ARRAY_OF[TEXT],
                        ARRAY_OF[INT8],
                        ARRAY_OF[INT8],
                        ARRAY_OF[INT8],
                        INT8,
                    ),
                ),
                Statement(
                    upsert,
                    (ARRAY_OF[INT8], ARRAY_OF[TEXT], ARRAY_OF[INT8], ARRAY_OF[BYTEA]),
                ),
                Statement(b"COMMIT"),
            ]
        )

    def run(self, conn: Connection[Any], writes: Sequence[ViewWrite]) -> None:
        """Commits ``writes``; raises psycopg's error, nothing written, if a
        statement fails (a moved tracking row: InvalidTextRepresentation
        naming MOVED).

        ``conn`` is in autocommit mode (eventsourcing's pool sets it).
        """
        encoding = self._pipeline.encoding(conn)
        generations: list[int] = []
        parts: list[bytes] = []
        positions: list[int] = []
        docs: list[bytes] = []
        for write in writes:
            generations.extend([write.generation] * len(write.docs))
            parts.extend(part.encode(encoding) for part, _ in write.keys)
            positions.extend(position for _, position in write.keys)
            docs.extend(write.docs)
        advance = [
            array(TEXT, [write.view.encode(encoding) for write in writes]),
            int8_array([write.from_position for write in writes]),
            int8_array([write.to_position for write in writes]),
            int8_array([write.generation for write in writes]),
            int8(len(writes)),
        ]
        upsert = [
            int8_array(generations),
            array(TEXT, parts),
            int8_array(positions),
            array(BYTEA, docs),
        ]
        self._pipeline.run(conn, [None, advance, upsert, None])


def moved(error: DataError) -> bool:
    """Whether ``error`` is the tracking statement refusing a moved row."""
    cause = error.__cause__
    return isinstance(cause, InvalidTextRepresentation) and MOVED in str(cause)
