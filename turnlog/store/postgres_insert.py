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

No answer is read before the Sync, but psycopg sends each statement as
soon as it is executed, and a thread of a busy process may wait for the
GIL between two of them (up to its switch interval, 5 ms) while the
server waits for the next one, lock held. So only the INSERT and the
COMMIT are sent under the lock, the column lists are built before the
pipeline opens, and the statements are rendered to bytes once, here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from psycopg import Connection
from psycopg.abc import Query
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL, Composable, Identifier, Literal

from turnlog.store.fencing import FIRST_EPOCH, Claim, Fence

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
        self.lock_table_statements: list[Query] = [
            s.as_bytes() if isinstance(s, Composable) else s
            for s in lock_table_statements
        ]
        self.token = uuid.uuid4().hex
        """The payload of this insert's NOTIFYs: the recorder hears its own
        commits from the Store that made them, not from the server."""
        self.notify = render(
            "NOTIFY {0}, {1}", Identifier(channel), Literal(self.token)
        )
        # Claims, fences and events in one statement, so that the lock is
        # held across as few of the client's sends as can be: LOCK, this,
        # COMMIT.
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
        self.fenced_events = render(
            "WITH claimed AS (INSERT INTO {0} (session_id, owner, renewed, epoch) "
            "SELECT session_id, owner, renewed, {1} FROM "
            "unnest(%b::text[], %b::text[], %b::float8[]) "
            "AS claim (session_id, owner, renewed) "
            "ON CONFLICT (session_id) DO NOTHING "
            "RETURNING session_id, owner, epoch), "
            "fences AS MATERIALIZED (SELECT CAST(CASE WHEN count(*) = %b::bigint "
            "THEN '1' ELSE %b END AS integer) AS held "
            "FROM unnest(%b::text[], %b::text[], %b::bigint[]) "
            "AS fence (session_id, owner, epoch) "
            "WHERE EXISTS (SELECT FROM {0} AS lease "
            "WHERE (lease.session_id, lease.owner, lease.epoch) "
            "= (fence.session_id, fence.owner, fence.epoch)) "
            "OR EXISTS (SELECT FROM claimed "
            "WHERE (claimed.session_id, claimed.owner, claimed.epoch) "
            "= (fence.session_id, fence.owner, fence.epoch))) "
            "INSERT INTO {2}.{3} (originator_id, originator_version, topic, state) "
            "SELECT event.* FROM unnest(%b::{4}[], %b::bigint[], %b::text[], "
            "%b::bytea[]) AS event, fences WHERE fences.held = 1 "
            "RETURNING notification_id",
            leases,
            FIRST_EPOCH,
            Identifier(schema),
            Identifier(events_table),
            SQL(id_type),
        )
        # A log without leases (no session fenced) may have no lease table.
        self.events = render(
            "INSERT INTO {0}.{1} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest(%b::{2}[], %b::bigint[], %b::text[], %b::bytea[]) "
            "RETURNING notification_id",
            Identifier(schema),
            Identifier(events_table),
            SQL(id_type),
        )

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
        events: tuple[Any, ...] = (
            [event.originator_id for event in stored_events],
            [event.originator_version for event in stored_events],
            [event.topic for event in stored_events],
            [event.state for event in stored_events],
        )
        insert_statement, columns = self.events, events
        if fenced:
            claims = [claim for _, claim in fenced if claim is not None]
            insert_statement = self.fenced_events
            columns = (
                [claim.session_id for claim in claims],
                [claim.owner for claim in claims],
                [claim.renewed for claim in claims],
                len(fenced),
                REFUSED,
                [fence.session_id for fence, _ in fenced],
                [fence.owner for fence, _ in fenced],
                [fence.epoch for fence, _ in fenced],
                *events,
            )
        with conn.cursor() as curs, conn.cursor(row_factory=tuple_row) as insert:
            try:
                with conn.pipeline():
                    curs.execute(b"BEGIN", prepare=True)
                    # Queued by the server until the COMMIT is done.
                    curs.execute(self.notify, prepare=True)
                    for statement in self.lock_table_statements:
                        curs.execute(statement, prepare=True)
                    insert.execute(insert_statement, columns, prepare=True)
                    curs.execute(b"COMMIT", prepare=True)
            except BaseException:
                if conn.info.transaction_status not in _SETTLED:
                    conn.rollback()
                raise
            return [row[0] for row in insert.fetchall()]


_SETTLED = (TransactionStatus.IDLE, TransactionStatus.UNKNOWN)
"""A connection with no transaction to roll back (or none left to do it)."""
