"""Stamping a save's events with their place in the session's hash chain.

Every event of a session carries ``session_seq`` and ``chain`` (declared
on every event by domain.events.LogEnvelope; the hashing itself is
domain.chain's). The store keeps each session's chain head and stamps a
save's events, in decision order, just before they are written.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from eventsourcing.persistence import AggregateRecorder, StoredEvent
from eventsourcing.utils import get_topic

from turnlog.domain.chain import CHAIN_FIELD, SEQ_FIELD, ChainHead, link_state
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.domain.lineage import SessionForked

# As turnlog.store.transcoder encodes a stored event's state.
_stored_encoder = msgspec.json.Encoder()
_raw_decoder = msgspec.json.Decoder(dict[str, Any])


def load_head(
    recorder: AggregateRecorder,
    get: Callable[[uuid.UUID], Any | None],
    session_id: str,
) -> ChainHead:
    """The chain head in the log: the newest event of the session.

    It is the last event of the Session (``get`` rebuilds it) or of its
    latest turn: turns run one at a time, so no older turn has a later
    event.
    """
    session = get(session_uuid(session_id))
    candidates = [session_uuid(session_id)]
    if session is not None and session.turn_count:
        candidates.append(turn_uuid(session_id, session.turn_count))
    best = ChainHead()
    for aggregate_id in candidates:
        # The recorder, not the event store: only the newest event's two
        # chain fields are needed, so it is not decoded or upcast.
        for stored in recorder.select_events(aggregate_id, desc=True, limit=1):
            state = _raw_decoder.decode(stored.state)
            if state.get(SEQ_FIELD, 0) > best.seq:
                best = ChainHead(state[SEQ_FIELD], state[CHAIN_FIELD])
    return best


def stamp(events: Sequence[Any], head: ChainHead) -> tuple[list[Any], ChainHead]:
    """``events`` made anew with their session seq and chain, after ``head``.

    Returns the stamped events (to save instead of ``events``) and the
    new head, to keep once the save has succeeded.
    """
    stamped, _, new_head = stamp_stored(events, head)
    return stamped, new_head


def stamp_stored(
    events: Sequence[Any],
    head: ChainHead,
    encode: Callable[[dict[str, Any]], bytes] = _stored_encoder.encode,
) -> tuple[list[Any], list[StoredEvent], ChainHead]:
    """As :func:`stamp`, with each event's stored form made on the way.

    The event's state is laid out once, as the mapper lays it out (see
    Mapper.to_stored_event), and serves twice: its link hashes it with
    sorted keys and without ``chain`` (domain.chain.canonical), and
    ``encode`` (the store's transcoder) makes the stored bytes from it,
    in the event's own key order, exactly the bytes the mapper would
    write for the stamped event. The order matters beyond JSON: what is
    read back from the log (a revived session's context, a replay) must
    equal what the session held live, keys in the order they came.
    """
    seq, digest = head.seq, head.digest
    stamped: list[Any] = []
    stored: list[StoredEvent] = []
    # A save's events belong to one or two aggregates (a Session and its
    # Turn), interleaved: the text of each id is kept rather than formatted
    # again (UUID.__str__ is Python, a tenth of stamping an event).
    last_id: Any = None
    id_text = ""
    other_id: Any = None
    other_text = ""
    for event in events:
        seq += 1
        cls = type(event)
        state = dict(vars(event))
        state[SEQ_FIELD] = seq
        originator_id = state.pop("originator_id")
        originator_version = state.pop("originator_version")
        class_version = getattr(cls, "class_version", 1)
        if class_version > 1:
            state["class_version"] = class_version
        # A turnlog event class holds the topic it was registered under
        # (domain.events.register_stable_topic), which get_topic returns
        # too, through a Python call an event.
        topic = cls.__dict__.get("TOPIC") or get_topic(cls)
        state.pop(CHAIN_FIELD, None)  # the link hashes the state without it
        if originator_id is not last_id:
            if originator_id is other_id:
                other_text, id_text = id_text, other_text
            else:
                other_text, id_text = id_text, str(originator_id)
            other_id, last_id = last_id, originator_id
        digest = link_state(digest, topic, id_text, originator_version, state)
        # Stored in the event's own key order, ``chain`` where it stands.
        state = dict(vars(event))
        state[SEQ_FIELD] = seq
        del state["originator_id"], state["originator_version"]
        if class_version > 1:
            state["class_version"] = class_version
        state[CHAIN_FIELD] = digest
        # eventsourcing's StoredEvent, a frozen dataclass, made as its
        # __init__ would make it, without that Python call a row.
        row = object.__new__(StoredEvent)
        fields = row.__dict__
        fields["originator_id"] = originator_id
        fields["originator_version"] = originator_version
        fields["topic"] = topic
        fields["state"] = encode(state)
        stored.append(row)
        # A copy with two fields changed, as dataclasses.replace makes it but
        # without running __init__ and its checks again on every field (the
        # event passed them when it was made): a tenth of a save's CPU.
        copy = object.__new__(cls)
        copy.__dict__.update(vars(event))
        copy.__dict__[SEQ_FIELD] = seq
        copy.__dict__[CHAIN_FIELD] = digest
        stamped.append(copy)
    return stamped, stored, ChainHead(seq, digest)


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
