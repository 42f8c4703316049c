"""The eventsourcing Application behind a Store, configured as turnlog needs it.

Only what the store URL says configures it; events are transcoded with
msgspec; each backend's recorder is turnlog's own (it owns that backend's
SQL, see turnlog.store.backend); and an event this turnlog cannot read is
refused with a clear error rather than loaded half-understood.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from eventsourcing.application import Application
from eventsourcing.persistence import Mapper, Recording, StoredEvent, Transcoder
from eventsourcing.utils import Environment, EnvType, TopicError, resolve_topic

from turnlog.domain.errors import ReplayError
from turnlog.store.transcoder import MsgspecTranscoder

_raw_decoder = msgspec.json.Decoder(dict[str, Any])

# The recorder of each backend, owning its SQL (turnlog.store.backend), named
# by topic so that only PostgreSQL users import psycopg.
RECORDERS = {
    "eventsourcing.sqlite": "turnlog.store.sqlite:SQLiteLogRecorder",
    "eventsourcing.postgres": "turnlog.store.postgres:PostgresLogRecorder",
}


class GuardedMapper(Mapper[uuid.UUID]):
    """The eventsourcing mapper, refusing events this turnlog cannot read.

    An event written by a newer turnlog (an unknown event class, or a
    ``class_version`` above the one this code knows) is refused with a
    clear ReplayError instead of being loaded half-understood.
    """

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        try:
            cls = resolve_topic(stored_event.topic)
        except TopicError:
            msg = (
                f"unknown event {stored_event.topic!r} (aggregate "
                f"{stored_event.originator_id}, version "
                f"{stored_event.originator_version}): written by a newer turnlog?"
            )
            raise ReplayError(msg) from None
        if b'"class_version":' in stored_event.state:
            stored = _raw_decoder.decode(stored_event.state).get("class_version", 1)
            known = getattr(cls, "class_version", 1)
            if isinstance(stored, int) and stored > known:
                msg = (
                    f"event {stored_event.topic!r} (aggregate "
                    f"{stored_event.originator_id}, version "
                    f"{stored_event.originator_version}) has class version "
                    f"{stored}; this turnlog reads up to {known}: upgrade turnlog"
                )
                raise ReplayError(msg)
        return super().to_domain_event(stored_event)


LOG_MAPPER = GuardedMapper(transcoder=MsgspecTranscoder())
"""The one mapper between domain events and stored events.

Every store's application uses it, and so does any reader holding stored
bytes without a store (a transcript item): it keeps no state of its own,
so one instance serves all.
"""


class TurnlogApplication(Application[uuid.UUID]):
    """The eventsourcing application behind a Store."""

    name = "turnlog"

    def __init__(self, env: dict[str, str]) -> None:
        self.listeners: list[Callable[[Sequence[Recording[uuid.UUID]]], None]] = []
        super().__init__(env)

    def construct_env(self, name: str, env: EnvType | None = None) -> Environment:
        # Only what the store URL says: eventsourcing would also read the
        # process environment, where an unrelated CIPHER_TOPIC or
        # CREATE_TABLE could silently change how the log is written.
        values = dict(env or {})
        module = values.get("PERSISTENCE_MODULE", "")
        if module in RECORDERS:
            values.setdefault("APPLICATION_RECORDER_TOPIC", RECORDERS[module])
        return Environment(name, values)

    def construct_transcoder(self) -> Transcoder:
        return MsgspecTranscoder()

    def construct_mapper(self) -> Mapper[uuid.UUID]:
        return LOG_MAPPER
