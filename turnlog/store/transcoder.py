"""A msgspec JSON transcoder for stored events.

eventsourcing's default JSON transcoder wraps non-JSON values in
``{"_type_": ..., "_data_": ...}`` envelopes; it is ~10x slower and cannot
tell such an envelope from user JSON of the same shape. turnlog payloads
are primitives by design, so the only non-JSON value in a stored event is
its ``timestamp``, which is stored as an RFC 3339 string. Events stay
readable with any SQLite or PostgreSQL client, which matters to auditors.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
from eventsourcing.persistence import Transcoder


class MsgspecTranscoder(Transcoder):
    """Encodes event state dicts as compact JSON with msgspec."""

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()
        self._decoder = msgspec.json.Decoder(dict[str, Any])
        self.encode_state: Callable[[Any], bytes] = self._encoder.encode
        """What :meth:`encode` does, without its Python call: a save encodes
        every event it stamps (turnlog.store.chaining.stamp_stored)."""

    def encode(self, obj: Any) -> bytes:
        """JSON bytes of an event's state dict."""
        return self._encoder.encode(obj)

    def decode(self, data: bytes) -> Any:
        """The state dict of stored JSON, with ``timestamp`` as a datetime."""
        state = self._decoder.decode(data)
        timestamp = state.get("timestamp")
        if isinstance(timestamp, str):
            state["timestamp"] = datetime.fromisoformat(timestamp)
        return state
