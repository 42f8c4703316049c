"""The hash chain that makes a session's history tamper-evident.

Every event of a session carries ``session_seq`` (1, 2, ... across the
Session and its Turns, in decision order) and ``chain``: the SHA-256 of
the previous event's ``chain`` and this event's canonical encoding (its
topic, aggregate, version and stored state without ``chain``, as JSON with
sorted keys). Changing, removing, adding or reordering any stored event
breaks the chain at that event, which an auditor can find from the log
alone. The fields are declared on every event (domain.events.LogEnvelope)
and given their values as the event is saved.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

GENESIS = "0" * 64
"""The ``chain`` value before a session's first event."""

SEQ_FIELD = "session_seq"
CHAIN_FIELD = "chain"

_encoder = msgspec.json.Encoder(order="sorted")


def canonical(
    topic: str, originator_id: str, originator_version: int, state: dict[str, Any]
) -> bytes:
    """The bytes an event's link hashes: everything stored but ``chain``."""
    body = {key: value for key, value in state.items() if key != CHAIN_FIELD}
    return canonical_bytes(
        topic, originator_id, originator_version, canonical_state(body)
    )


def canonical_state(state: dict[str, Any]) -> bytes:
    """An event's stored state (without ``chain``) as its canonical bytes hold it."""
    return _encoder.encode(state)


def canonical_bytes(
    topic: str, originator_id: str, originator_version: int, body: bytes
) -> bytes:
    """What :func:`canonical` encodes, with the state already encoded as ``body``.

    The same bytes as encoding the whole object with sorted keys, whose
    order is originator_id, originator_version, state, topic.
    """
    return b"".join(
        (
            b'{"originator_id":',
            _encoder.encode(originator_id),
            b',"originator_version":',
            _encoder.encode(originator_version),
            b',"state":',
            body,
            b',"topic":',
            _encoder.encode(topic),
            b"}",
        )
    )


def link(previous: str, encoded: bytes) -> str:
    """The chain value of an event following ``previous``."""
    return hashlib.sha256(previous.encode("ascii") + encoded).hexdigest()


def link_state(
    previous: str,
    topic: str,
    originator_id: str,
    originator_version: int,
    state: dict[str, Any],
) -> str:
    """``link(previous, canonical_bytes(..., canonical_state(state)))`` in
    one formatting: every save links each of its events this way.

    ``state`` is the stored state without ``chain``. The same bytes as
    :func:`canonical_bytes` (tests/store/test_stamped_encoding.py holds
    them equal): an int's JSON is its decimal digits, and a topic's JSON
    is encoded once and kept, since a process saves few distinct topics.
    """
    topic_json = _topic_json.get(topic)
    if topic_json is None:
        topic_json = _topic_json[topic] = _encoder.encode(topic)
    body = b'{"originator_id":%b,"originator_version":%d,"state":%b,"topic":%b}' % (
        _encoder.encode(originator_id),
        originator_version,
        _encoder.encode(state),
        topic_json,
    )
    return hashlib.sha256(previous.encode("ascii") + body).hexdigest()


_topic_json: dict[str, bytes] = {}
"""Each topic linked so far, as JSON (event classes' topics: a few dozen)."""


class ChainHead(msgspec.Struct, frozen=True):
    """Where a session's chain ends: the last event's seq and chain."""

    seq: int = 0
    digest: str = GENESIS


def event_seq(event: object) -> int:
    """An event's place in its session (0 for an event never saved)."""
    seq = getattr(event, SEQ_FIELD, 0)
    return seq if isinstance(seq, int) else 0
