"""PostgreSQL: a save's transaction, or a group commit's, in one round trip.

The events table is locked from the transaction's first statement to its
COMMIT: positions (notification ids) are handed out in commit order only
because no other insert can take any while one is open, so readers that
follow the log never pass over a position that a slower transaction fills
in later. Every round trip to the server inside that transaction, and
every moment the client spends on it meanwhile, is time in which no other
session and no other process can save.

eventsourcing's insert (``PostgresApplicationRecorder.insert_events``)
makes five round trips, four of them under the lock: a sync after BEGIN,
one after the INSERT (to see a clash there), one more on leaving its
pipeline and the COMMIT's. Here the whole transaction goes in one
pipeline with one Sync:

    BEGIN
    NOTIFY (queued by the server until the COMMIT is done)
    SET LOCAL lock_timeout ...; LOCK TABLE events IN EXCLUSIVE MODE
        (eventsourcing's ``lock_table_statements``)
    one INSERT: of the batch's claims (new sessions' leases), a check
        that fails its cast unless every fence of the batch holds, and
        the events, RETURNING their positions
    COMMIT

A statement that fails makes the server skip the rest, COMMIT too; the
transaction is then rolled back (a second round trip, on failure only).
The statement carries the whole batch as column arrays in binary, so a
group commit of a hundred saves is as many statements as a lone save:
psycopg adapts eventsourcing's array of composite rows in Python, as
text, ten times slower.

The whole pipeline leaves in one write (turnlog.store.postgres_pipeline):
no statement waits in the client, lock held, for the next one while its
thread waits for the GIL; and the parameters, the batch's column lists
in binary, are made before the pipeline opens.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from psycopg import Connection
from psycopg.abc import Query
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composable, Identifier, Literal

from turnlog.store.fencing import FIRST_EPOCH, Claim, Fence
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

REFUSED = "turnlog fence: lease lost"
"""The text the fence statement fails to cast when a lease is gone."""


class OneRoundTripInsert:
    """The statements of a fenced insert, and how they are sent."""

    def __init__(
        self,
        *,
        schema: str,
        events_table: str,
        lease_table: str,
        id_type: str,
        lock_table_statements: Sequence[Query],
        channel: str,
    ) -> None:
        def render(statement: str, *names: Any) -> bytes:
            return SQL(statement).format(*names).as_bytes()

        leases = SQL("{0}.{1}").format(Identifier(schema), Identifier(lease_table))
        lock_table: list[bytes] = [
            s.as_bytes() if isinstance(s, Composable) else _as_bytes(s)
            for s in lock_table_statements
        ]
        self.token = uuid.uuid4().hex
        """The payload of this insert's NOTIFYs: the recorder hears its own
        commits from the Store that made them, not from the server."""
        notify = render("NOTIFY {0}, {1}", Identifier(channel), Literal(self.token))
        if id_type != "uuid":
            # turnlog's stores never choose eventsourcing's text ids.
            msg = f"aggregate ids of type {id_type!r}: only uuid is written"
            raise ValueError(msg)
        events_types = (ARRAY_OF[UUID], ARRAY_OF[INT8], ARRAY_OF[TEXT], ARRAY_OF[BYTEA])
        # Claims, fences and events in one statement, so that the lock is
        # held across as few statements as can be: LOCK, this, COMMIT.
        #
        # A new session's lease, taken in its first save (after the events
        # table's lock, as a takeover takes that lock before the lease row:
        # the same order, so neither waits for the other in a cycle). A row
        # already there is left alone, and the fence check refuses the save
        # unless that row is this very lease.
        #
        # The fences are read under the events table's lock, so they see
        # the leases as committed by then; a takeover locks that table too
        # (the recorder's lock_out_saves), so it cannot commit between this
        # check and the save's commit. A claim's own row is seen through
        # its RETURNING (the statement's snapshot predates it). A lost
        # lease fails the cast, aborting the transaction without a round
        # trip of its own; the events join the check's one row on its
        # value, so the check cannot be planned away.
        fenced_events = render(
            "WITH claimed AS (INSERT INTO {0} (session_id, owner, renewed, epoch) "
            "SELECT session_id, owner, renewed, {1} FROM "
            "unnest($1::text[], $2::text[], $3::float8[]) "
            "AS claim (session_id, owner, renewed) "
            "ON CONFLICT (session_id) DO NOTHING "
            "RETURNING session_id, owner, epoch), "
            "fences AS MATERIALIZED (SELECT CAST(CASE WHEN count(*) = $4::bigint "
            "THEN '1' ELSE $5 END AS integer) AS held "
            "FROM unnest($6::text[], $7::text[], $8::bigint[]) "
            "AS fence (session_id, owner, epoch) "
            "WHERE EXISTS (SELECT FROM {0} AS lease "
            "WHERE (lease.session_id, lease.owner, lease.epoch) "
            "= (fence.session_id, fence.owner, fence.epoch)) "
            "OR EXISTS (SELECT FROM claimed "
            "WHERE (claimed.session_id, claimed.owner, claimed.epoch) "
            "= (fence.session_id, fence.owner, fence.epoch))) "
            "INSERT INTO {2}.{3} (originator_id, originator_version, topic, state) "
            "SELECT event.* FROM unnest($9::{4}[], $10::bigint[], $11::text[], "
            "$12::bytea[]) AS event, fences WHERE fences.held = 1 "
            "RETURNING notification_id",
            leases,
            FIRST_EPOCH,
            Identifier(schema),
            Identifier(events_table),
            SQL(id_type),
        )
        fences_types = (
            ARRAY_OF[TEXT],
            ARRAY_OF[TEXT],
            ARRAY_OF[FLOAT8],
            INT8,
            TEXT,
            ARRAY_OF[TEXT],
            ARRAY_OF[TEXT],
            ARRAY_OF[INT8],
        )
        # A log without leases (no session fenced) may have no lease table.
        events = render(
            "INSERT INTO {0}.{1} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest($1::{2}[], $2::bigint[], $3::text[], $4::bytea[]) "
            "RETURNING notification_id",
            Identifier(schema),
            Identifier(events_table),
            SQL(id_type),
        )

        def transaction(insert: Statement) -> PreparedPipeline:
            return PreparedPipeline(
                [
                    Statement(b"BEGIN"),
                    # Queued by the server until the COMMIT is done.
                    Statement(notify),
                    *(Statement(statement) for statement in lock_table),
                    insert,
                    Statement(b"COMMIT"),
                ]
            )

        self._fenced = transaction(
            Statement(fenced_events, fences_types + events_types)
        )
        self._unfenced = transaction(Statement(events, events_types))
        self._insert_at = 2 + len(lock_table)
        """The INSERT's place in the pipeline."""

    def run(
        self,
        conn: Connection[DictRow],
        stored_events: Sequence[StoredEvent],
        fenced: Sequence[tuple[Fence, Claim | None]],
    ) -> list[int]:
        """Inserts ``stored_events`` if every fence holds; their positions.

        ``conn`` is in autocommit mode (eventsourcing's pool sets it), so
        psycopg sends no BEGIN of its own. Raises psycopg's error, with
        nothing recorded, if a statement fails.
        """
        pipeline = self._fenced if fenced else self._unfenced
        encoding = pipeline.encoding(conn)
        events = self._event_columns(stored_events, encoding)
        columns = events
        if fenced:
            claims = [claim for _, claim in fenced if claim is not None]
            columns = [
                _texts([claim.session_id for claim in claims], encoding),
                _texts([claim.owner for claim in claims], encoding),
                float8_array([claim.renewed for claim in claims]),
                int8(len(fenced)),
                REFUSED.encode(encoding),
                _texts([fence.session_id for fence, _ in fenced], encoding),
                _texts([fence.owner for fence, _ in fenced], encoding),
                int8_array([fence.epoch for fence, _ in fenced]),
                *events,
            ]
        params: list[list[bytes] | None] = [None] * (self._insert_at + 2)
        params[self._insert_at] = columns
        inserted = pipeline.run(conn, params)[self._insert_at]
        return [
            int.from_bytes(inserted.get_value(row, 0) or b"", "big", signed=True)
            for row in range(inserted.ntuples)
        ]

    def _event_columns(
        self, stored_events: Sequence[StoredEvent], encoding: str
    ) -> list[bytes]:
        """The events' four columns, each an array in binary."""
        return [
            uuid_array([event.originator_id for event in stored_events]),
            int8_array([event.originator_version for event in stored_events]),
            _texts([event.topic for event in stored_events], encoding),
            array(BYTEA, [event.state for event in stored_events]),
        ]


def _texts(values: Sequence[str], encoding: str) -> bytes:
    """A text[] in binary."""
    return array(TEXT, [value.encode(encoding) for value in values])


def _as_bytes(statement: Query) -> bytes:
    if isinstance(statement, bytes):
        return statement
    if isinstance(statement, str):
        return statement.encode()
    msg = f"a statement of unknown kind: {statement!r}"
    raise TypeError(msg)
