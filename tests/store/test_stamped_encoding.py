"""Stamping makes the stored rows: the mapper's very bytes, and links that verify."""

from __future__ import annotations

import msgspec

from turnlog.domain.chain import GENESIS, ChainHead, canonical, link, link_state
from turnlog.domain.session import Session
from turnlog.store.application import LOG_MAPPER
from turnlog.store.chaining import stamp_stored


def decided_events() -> list[object]:
    session = Session.create(
        "s-é",
        agent_name='a\u2028"quoted"',
        agent_digest="d",
        shared_state={"z": [1, {"b": None, "a": "ü"}], "a": 1.5},
        model_route="default",
    )
    session.update_shared_state({"k": {"nested": ["x", 2]}, "emoji": "🙂"})
    return session.collect_events()


def test_stored_rows_are_the_mappers_bytes() -> None:
    stamped, stored, _ = stamp_stored(decided_events(), ChainHead())
    for event, row in zip(stamped, stored, strict=True):
        # Byte for byte, keys in the event's own order: what is read back
        # (a revived context, a replay) equals what the session held live.
        assert row == LOG_MAPPER.to_stored_event(event)


def test_keys_come_back_in_the_order_they_were_given() -> None:
    _, stored, _ = stamp_stored(decided_events(), ChainHead())
    changes = LOG_MAPPER.transcoder.decode(stored[-1].state)["changes"]
    assert list(changes) == ["k", "emoji"]


def test_each_link_verifies_from_the_stored_bytes_alone() -> None:
    _, stored, head = stamp_stored(decided_events(), ChainHead())
    digest = GENESIS
    for row in stored:
        # As turnlog audit --verify recomputes it: decode, then canonical.
        state = LOG_MAPPER.transcoder.decode(row.state)
        recomputed = link(
            digest,
            canonical(row.topic, str(row.originator_id), row.originator_version, state),
        )
        assert recomputed == state["chain"]
        digest = recomputed
    assert head == ChainHead(len(stored), digest)


def test_canonical_bytes_are_the_sorted_encoding_of_the_whole_event() -> None:
    # The bytes logs written before the one-encoding save were chained with.
    whole = msgspec.json.Encoder(order="sorted")
    _, stored, _ = stamp_stored(decided_events(), ChainHead())
    for row in stored:
        state = LOG_MAPPER.transcoder.decode(row.state)
        del state["chain"]
        expected = whole.encode(
            {
                "topic": row.topic,
                "originator_id": str(row.originator_id),
                "originator_version": row.originator_version,
                "state": state,
            }
        )
        assert (
            canonical(row.topic, str(row.originator_id), row.originator_version, state)
            == expected
        )


def test_a_link_hashes_the_canonical_bytes_whatever_the_topic() -> None:
    # link_state formats the bytes itself; an audit recomputes them with
    # canonical. Topics and ids that JSON must escape, and a long version.
    state = {"z": [1, {"b": None}], "a": "ü\u2028"}
    for topic in ("turnlog:Probe", 'odd:"quoted"\\\u2028é', "turnlog:Probe"):
        for originator_id in ("7f1c3a52-0d8e-4c1b-9d2e-5a6b7c8d9e0f", 'id-"é"'):
            for version in (1, 10**15):
                assert link_state(GENESIS, topic, originator_id, version, state) == (
                    link(GENESIS, canonical(topic, originator_id, version, state))
                )
