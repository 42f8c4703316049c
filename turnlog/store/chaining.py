"""Stamping a save's events with their place in the session's hash chain.

Every event of a session carries ``session_seq`` and ``chain`` (declared
on every event by domain.events.LogEnvelope; the hashing itself is
domain.chain's). The store keeps each session's chain head and stamps a
save's events, in decision order, just before they are written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.utils import get_topic

from turnlog.domain.chain import CHAIN_FIELD, SEQ_FIELD, ChainHead, canonical, link
from turnlog.domain.ids import session_uuid
from turnlog.domain.lineage import SessionForked


def stamp(events: Sequence[Any], head: ChainHead) -> tuple[list[Any], ChainHead]:
    """``events`` made anew with their session seq and chain, after ``head``.

    Returns the stamped events (to save instead of ``events``) and the
    new head, to keep once the save has succeeded.
    """
    seq, digest = head.seq, head.digest
    stamped = []
    for event in events:
        seq += 1
        # The state as the mapper will store it (see Mapper.to_stored_event).
        state = dict(vars(event))
        state[SEQ_FIELD] = seq
        originator_id = state.pop("originator_id")
        originator_version = state.pop("originator_version")
        class_version = getattr(type(event), "class_version", 1)
        if class_version > 1:
            state["class_version"] = class_version
        encoded = canonical(
            get_topic(type(event)), str(originator_id), originator_version, state
        )
        digest = link(digest, encoded)
        # A copy with two fields changed, as dataclasses.replace makes it but
        # without running __init__ and its checks again on every field (the
        # event passed them when it was made): a tenth of a save's CPU.
        copy = object.__new__(type(event))
        copy.__dict__.update(vars(event))
        copy.__dict__[SEQ_FIELD] = seq
        copy.__dict__[CHAIN_FIELD] = digest
        stamped.append(copy)
    return stamped, ChainHead(seq, digest)


def creates_session(events: Sequence[Any]) -> bool:
    """Whether ``events`` begin with a Session's first event.

    Such a save commits only if the log holds no event of the session (its
    first version would clash), so its chain starts from nothing: the head
    the log would give, known without reading it.
    """
    first = events[0]
    return bool(
        first.originator_version == 1
        and first.originator_id == session_uuid(first.session_id)
    )


def first_head(events: Sequence[Any]) -> ChainHead:
    """The head a session's first save starts from.

    Nothing for a new session; for a fork, the source's chain at the fork
    point, which the fork's events carry on (turnlog.domain.lineage).
    """
    first = events[0]
    if isinstance(first, SessionForked):
        return ChainHead(first.source_seq, first.source_digest)
    return ChainHead()
