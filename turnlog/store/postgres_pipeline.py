"""PostgreSQL: a fixed run of statements, prepared once a connection, sent in one write.

A save's transaction is a handful of statements (turnlog.store.postgres_insert).
psycopg's pipeline sends each one as it is executed: a write and two polls
a statement, and a pass through psycopg's Python query machinery (query
conversion, its prepared-statement bookkeeping, result processing) each
time; its list dumpers also look at every element of every array
parameter to choose a type. That was two thirds of the client CPU of a
PostgreSQL save (about 300 of 450 us), and the reason a turn cost more
CPU than on SQLite.

Here the statements go to libpq through ``psycopg.pq``, psycopg's libpq
wrapper: each is prepared the first time a connection runs it (a Parse
queued in the same pipeline), then bound and executed by name; one Sync
ends the pipeline, and libpq writes it all at once. The answers are read
with psycopg's own non-blocking generators (``psycopg.generators``) through
``Connection.wait``, as psycopg's cursors read theirs. Parameters are sent
in PostgreSQL's binary format, arrays encoded here (``array``): their
element types are known, so nothing is looked at twice.

A connection's prepared statements can be dropped behind this module's
back (psycopg sends ``DEALLOCATE ALL`` after some rollbacks of its own): a
run refused for a missing prepared statement prepares them again and runs
once more, which is safe because the refusal came before any statement
ran.
"""

from __future__ import annotations

import struct
import uuid
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

from psycopg import Connection, errors, generators
from psycopg.pq import ExecStatus, Format, PipelineStatus, TransactionStatus
from psycopg.pq.abc import PGresult

TEXT = 25
BYTEA = 17
INT8 = 20
FLOAT8 = 701
UUID = 2950
ARRAY_OF = {TEXT: 1009, BYTEA: 1001, INT8: 1016, FLOAT8: 1022, UUID: 2951}
"""The type of an array of each element type (pg_type's typarray)."""

_ONE_DIMENSION = struct.Struct(
    ">iiiii"
)  # dimensions, has nulls, element, length, lower bound
_EMPTY = struct.Struct(">iii")  # no dimensions, no nulls, element
_LENGTH = struct.Struct(">i")
_INT8 = struct.Struct(">q")


def array(element: int, values: Sequence[bytes]) -> bytes:
    """A one-dimensional array of ``values`` (each already in binary), in binary.

    PostgreSQL's array_recv: a header (dimensions, a has-nulls flag, the
    element type, each dimension's length and lower bound), then every
    element's length and bytes. ``element`` must be the very type the
    server expects, or it refuses the array.
    """
    if not values:
        return _EMPTY.pack(0, 0, element)
    pack = _LENGTH.pack
    parts = [_ONE_DIMENSION.pack(1, 0, element, len(values), 1)]
    for value in values:
        parts.append(pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def int8_array(values: Sequence[int]) -> bytes:
    """A bigint[] in binary."""
    return _fixed_width(INT8, "q", values)


def float8_array(values: Sequence[float]) -> bytes:
    """A double precision[] in binary."""
    return _fixed_width(FLOAT8, "d", values)


def int8(value: int) -> bytes:
    """A bigint in binary."""
    return _INT8.pack(value)


def uuid_array(values: Sequence[uuid.UUID | str]) -> bytes:
    """A uuid[] in binary."""
    return array(UUID, [_uuid(value).bytes for value in values])


def _uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def _fixed_width(element: int, code: str, values: Sequence[Any]) -> bytes:
    if not values:
        return _EMPTY.pack(0, 0, element)
    size = struct.calcsize(code)
    # Each element is its length, then its value.
    body = struct.pack(">" + ("i" + code) * len(values), *_lengths(size, values))
    return _ONE_DIMENSION.pack(1, 0, element, len(values), 1) + body


def _lengths(size: int, values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        out.append(size)
        out.append(value)
    return out


class Statement(NamedTuple):
    """One statement of a pipeline: its SQL, with ``$n`` placeholders, and
    the type of each parameter (all are sent in binary)."""

    sql: bytes
    param_types: tuple[int, ...] = ()


class _Prepared:
    """What one connection has prepared of one pipeline, under which names."""

    __slots__ = ("done", "encoding", "names")

    def __init__(self, encoding: str, names: list[bytes]) -> None:
        self.done: set[int] = set()
        self.encoding = encoding
        self.names = names


class PreparedPipeline:
    """Runs its statements, in order, as one pipeline ending in one Sync.

    Each statement is a prepared statement of every connection that runs
    it, named by the pipeline (a token of its own, so two pipelines never
    share a name).
    """

    def __init__(self, statements: Sequence[Statement]) -> None:
        self._statements = list(statements)
        self._token = uuid.uuid4().hex[:12]
        self._renamed = 0
        self._prepared: weakref.WeakKeyDictionary[Any, _Prepared] = (
            weakref.WeakKeyDictionary()
        )

    def encoding(self, conn: Connection[Any]) -> str:
        """The Python codec of ``conn``'s client encoding (for text parameters)."""
        return self._state(conn).encoding

    def run(
        self, conn: Connection[Any], params: Sequence[Sequence[bytes] | None]
    ) -> list[PGresult]:
        """Runs every statement with its ``params``; the result of each.

        ``conn`` must be idle, out of any pipeline, and in autocommit mode
        (psycopg then sends nothing of its own). Raises psycopg's error for
        the first statement that failed (the server skipped the rest); a
        transaction it left open is rolled back first.
        """
        state = self._state(conn)
        try:
            return self._exchange(conn, state, params)
        except errors.InvalidSqlStatementName:
            # Deallocated on this connection by someone else: refused at
            # the first statement, so nothing ran. Prepared anew under new
            # names, in case some of the old ones are still there.
            del self._prepared[conn]
            return self._exchange(conn, self._state(conn), params)

    def _state(self, conn: Connection[Any]) -> _Prepared:
        state = self._prepared.get(conn)
        if state is None:
            self._renamed += 1
            prefix = f"turnlog_{self._token}_{self._renamed}_"
            names = [f"{prefix}{n}".encode() for n in range(len(self._statements))]
            state = self._prepared[conn] = _Prepared(conn.info.encoding, names)
        return state

    def _exchange(
        self,
        conn: Connection[Any],
        state: _Prepared,
        params: Sequence[Sequence[bytes] | None],
    ) -> list[PGresult]:
        pgconn = conn.pgconn
        # (statement, whether this is its Parse) of each answer to come.
        answers: list[tuple[int, bool]] = []
        with conn.lock:
            pgconn.enter_pipeline_mode()
            try:
                for n, (statement, values) in enumerate(
                    zip(self._statements, params, strict=True)
                ):
                    name = state.names[n]
                    if n not in state.done:
                        pgconn.send_prepare(name, statement.sql, statement.param_types)
                        answers.append((n, True))
                    formats = [Format.BINARY] * len(values) if values else None
                    pgconn.send_query_prepared(name, values, formats, Format.BINARY)
                    answers.append((n, False))
                pgconn.pipeline_sync()
                conn.wait(generators.send(pgconn))
                results, error = self._read(conn, state, answers)
                conn.wait(generators.fetch_many(pgconn))  # the Sync's
                pgconn.exit_pipeline_mode()
            except BaseException:
                # Cut off in the middle of the exchange (the connection
                # broke, or an interrupt): nothing can be read from it in
                # order again, so the pool must not hand it out.
                if pgconn.pipeline_status != PipelineStatus.OFF:
                    conn.close()
                raise
        if error is not None:
            if pgconn.transaction_status not in _SETTLED:
                _roll_back(conn)
            raise error
        return results

    def _read(
        self,
        conn: Connection[Any],
        state: _Prepared,
        answers: list[tuple[int, bool]],
    ) -> tuple[list[PGresult], errors.Error | None]:
        pgconn = conn.pgconn
        results: list[PGresult] = []
        error: errors.Error | None = None
        for n, parse in answers:
            for result in conn.wait(generators.fetch_many(pgconn)):
                status = result.status
                if status == ExecStatus.FATAL_ERROR:
                    if error is None:
                        error = errors.error_from_result(
                            result, encoding=state.encoding
                        )
                elif status == ExecStatus.PIPELINE_ABORTED:
                    pass
                elif parse:
                    state.done.add(n)
                else:
                    results.append(result)
        return results, error


def _roll_back(conn: Connection[Any]) -> None:
    """Ends the failed transaction (its own round trip, on failure only).

    Not ``conn.rollback()``: psycopg may deallocate every prepared statement
    of the connection with it.
    """
    pgconn = conn.pgconn
    with conn.lock:
        pgconn.send_query(b"ROLLBACK")
        conn.wait(generators.send(pgconn))
        while conn.wait(generators.fetch_many(pgconn)):
            pass


_SETTLED = (TransactionStatus.IDLE, TransactionStatus.UNKNOWN)
"""A connection with no transaction to roll back (or none left to do it)."""
