"""Checking a session's history against its hash chain.

Reads the events table directly (no projection, no upcasting) and walks
each session's events in ``session_seq`` order, recomputing every link.
The first event that does not fit is named, with what is wrong with it:

- ``altered``: its stored content no longer matches its link;
- ``missing``: events before it are gone (a gap in the session seq);
- ``inserted``: it repeats a session seq, or carries no chain at all;
- ``reordered``: the log holds it before an event that came earlier;
- ``truncated``: the chain ends before a head recorded elsewhere (the
  sessions view, an export's header, an anchor the user kept): the last
  events are gone, and the last event left is named;
- ``rewritten``: the event at a recorded head's seq is not the recorded
  one (or, for a digest alone, no event carries it): the history up to it
  was replaced by one that links up again.

A chain is checked from the log alone, so removing a session's last
events leaves nothing to notice there: only a head recorded before the
removal, compared in :func:`head_problem`, reveals it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from turnlog.domain.chain import (
    CHAIN_FIELD,
    GENESIS,
    SEQ_FIELD,
    ChainHead,
    canonical,
    link,
)
from turnlog.domain.errors import UnknownSessionError
from turnlog.domain.ids import check_session_id
from turnlog.store.history import SessionHistory
from turnlog.store.log import Store

_decoder = msgspec.json.Decoder(dict[str, Any])


class ChainProblem(msgspec.Struct, frozen=True):
    """The first event of a session that breaks its chain."""

    kind: str
    position: int
    sequence: int | None
    """The event's place in its session (its ``session_seq``), if it has one."""
    topic: str
    detail: str


class ExpectedHead(msgspec.Struct, frozen=True):
    """A head of a session's chain recorded away from its events.

    ``seq`` 0 means only the digest is known (an anchor given as a bare
    digest): then some event of the chain must carry it.
    """

    seq: int
    digest: str
    source: str
    """Where it was recorded, for the verdict: "the sessions view", ..."""


class VerifyReport(msgspec.Struct, frozen=True):
    """A session's verdict: how many events were checked, the first problem."""

    session_id: str
    events: int
    problem: ChainProblem | None
    head: ChainHead | None = None
    """Where the chain ends (None when it has no events, or fails)."""

    @property
    def ok(self) -> bool:
        """Whether the whole chain holds."""
        return self.problem is None


class ChainRow(msgspec.Struct):
    """One stored event as the chain check reads it."""

    position: int
    topic: str
    originator_id: str
    version: int
    state: dict[str, Any]


def _session_rows(store: Store, session_id: str) -> list[ChainRow]:
    """Every stored event of the session's aggregates, decoded for the check."""
    return [_row(raw) for raw in SessionHistory(store).rows(session_id)]


def _row(raw: tuple[int, Any, int, str, bytes]) -> ChainRow:
    position, originator, version, topic, state = raw
    return ChainRow(position, topic, str(originator), version, _decoder.decode(state))


def verify_session(
    store: Store, session_id: str, expected: Sequence[ExpectedHead] = ()
) -> VerifyReport:
    """Checks every event of ``session_id``, and that it reaches ``expected``.

    Raises:
        UnknownSessionError: the log holds no event of the session and
            nothing expected it to (else the verdict names the removal).
    """
    check_session_id(session_id)
    rows = _session_rows(store, session_id)
    if not rows and not expected:
        msg = f"no session {session_id!r} in the log at {store.location}"
        raise UnknownSessionError(msg)
    problem = first_problem(rows)
    for head in expected:
        if problem is not None:
            break
        problem = head_problem(rows, head)
    if problem is not None or not rows:
        return VerifyReport(session_id, len(rows), problem)
    last = rows[-1].state
    return VerifyReport(
        session_id, len(rows), None, ChainHead(last[SEQ_FIELD], last[CHAIN_FIELD])
    )


def head_problem(rows: list[ChainRow], head: ExpectedHead) -> ChainProblem | None:
    """Whether an intact chain (``rows`` as :func:`first_problem` left them:
    sorted, seq 1, 2, ...) reaches ``head`` and holds it."""
    short = head.digest[:12]
    if not rows:
        return ChainProblem(
            "truncated",
            0,
            None,
            "",
            f"every event is gone; {head.source} holds its head at sequence "
            f"{head.seq} (sha256 {short}...)",
        )
    last = rows[-1]
    end = last.state[SEQ_FIELD]
    if head.seq == 0:
        if any(row.state[CHAIN_FIELD] == head.digest for row in rows):
            return None
        return ChainProblem(
            "rewritten",
            last.position,
            end,
            last.topic,
            f"no event carries the sha256 {short}... {head.source} holds: the "
            f"chain (ending at sequence {end}) was cut or replaced before it",
        )
    if head.seq > end:
        gone = str(end + 1) if head.seq == end + 1 else f"{end + 1} to {head.seq}"
        return ChainProblem(
            "truncated",
            last.position,
            end,
            last.topic,
            f"the chain ends here, but {head.source} holds its head at sequence "
            f"{head.seq}: events with sequence {gone} are gone",
        )
    row = rows[head.seq - 1]
    if row.state[CHAIN_FIELD] != head.digest:
        return ChainProblem(
            "rewritten",
            row.position,
            head.seq,
            row.topic,
            f"its link is not the sha256 {short}... {head.source} holds: the "
            "history up to it was replaced",
        )
    return None


def first_problem(rows: list[ChainRow]) -> ChainProblem | None:
    """The first event of one session's ``rows`` that breaks the chain, if any."""
    unchained = [r for r in rows if not isinstance(r.state.get(SEQ_FIELD), int)]
    if unchained:
        first = min(unchained, key=lambda r: r.position)
        return ChainProblem(
            "inserted", first.position, None, first.topic, "the event carries no chain"
        )
    rows.sort(key=lambda r: (r.state[SEQ_FIELD], r.position))
    previous = GENESIS
    expected = 1
    last_position = 0
    for row in rows:
        seq = row.state[SEQ_FIELD]
        if seq < expected:
            return ChainProblem(
                "inserted",
                row.position,
                seq,
                row.topic,
                f"a second event with sequence {seq}",
            )
        if seq > expected:
            return ChainProblem(
                "missing",
                row.position,
                seq,
                row.topic,
                f"events with sequence {expected} to {seq - 1} are gone",
            )
        encoded = canonical(row.topic, row.originator_id, row.version, row.state)
        if link(previous, encoded) != row.state.get(CHAIN_FIELD):
            return ChainProblem(
                "altered",
                row.position,
                seq,
                row.topic,
                "its content does not match its link",
            )
        if row.position < last_position:
            return ChainProblem(
                "reordered",
                row.position,
                seq,
                row.topic,
                f"the log holds it before position {last_position}, an earlier event",
            )
        previous, last_position, expected = (
            row.state[CHAIN_FIELD],
            row.position,
            seq + 1,
        )
    return None


class _SessionOf(msgspec.Struct):
    session_id: str | None = None


_session_of = msgspec.json.Decoder(_SessionOf)


def all_session_ids(store: Store, batch: int = 1000) -> Iterator[str]:
    """Every session id in the log, in the order of its first event.

    Read from every event, not only ``SessionCreated``: a session whose
    first event was deleted must still be found, and reported.
    """
    seen: set[str] = set()
    start = 1
    while True:
        notes = store.notifications(start, batch)
        if not notes:
            return
        for note in notes:
            session_id = _session_of.decode(note.state).session_id
            if session_id is not None and session_id not in seen:
                seen.add(session_id)
                yield session_id
        start = notes[-1].id + 1


def verify_each(
    store: Store, expected: Mapping[str, Sequence[ExpectedHead]] | None = None
) -> Iterator[VerifyReport]:
    """Checks every session, one verdict at a time.

    A session ``expected`` names is checked against those heads, and
    reported even if the log holds none of its events any more.
    """
    heads = expected or {}
    seen: set[str] = set()
    for session_id in itertools.chain(all_session_ids(store), list(heads)):
        if session_id not in seen:
            seen.add(session_id)
            yield verify_session(store, session_id, heads.get(session_id, ()))


def verify_all(
    store: Store,
    progress: Callable[[int, int], None] | None = None,
    expected: Mapping[str, Sequence[ExpectedHead]] | None = None,
) -> list[VerifyReport]:
    """Checks every session (see :func:`verify_each`);
    ``progress(sessions done, events checked)``."""
    reports: list[VerifyReport] = []
    events = 0
    for report in verify_each(store, expected):
        reports.append(report)
        events += report.events
        if progress is not None:
            progress(len(reports), events)
    return reports
