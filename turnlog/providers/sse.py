"""Server-sent events, decoded from the raw bytes of an HTTP body.

Follows the event-stream rules of the HTML standard: lines end in CRLF,
LF or CR; ``data:`` lines of one event are joined with LF; a blank line
dispatches the event; lines starting with ``:`` are comments; an event
left unterminated when the body ends is discarded. Data stays as bytes so
the JSON decoder reads it without a copy to ``str``.
"""

from __future__ import annotations

import msgspec


class ServerSentEvent(msgspec.Struct, frozen=True):
    """One dispatched event: its type (``message`` if unnamed) and its data."""

    event: str
    data: bytes


class SSEDecoder:
    """Turns chunks of an event stream into events, keeping partial lines."""

    def __init__(self) -> None:
        self._pending = b""
        self._event = ""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events completed by ``chunk`` (possibly none)."""
        buffer = self._pending + chunk if self._pending else chunk
        held_cr = False
        if b"\r" in buffer:
            # A CR at the end may be the first half of a CRLF split across
            # chunks: hold it back, or the break would count twice and
            # dispatch an event before its last data line.
            held_cr = buffer.endswith(b"\r")
            if held_cr:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        rest = lines.pop()
        self._pending = rest + b"\r" if held_cr else rest
        return self._lines(lines) if lines else []

    def end(self) -> list[ServerSentEvent]:
        """The events the end of the body completes (a last line ended by CR)."""
        pending, self._pending = self._pending, b""
        if pending.endswith(b"\r"):
            return self._lines([pending[:-1]])
        return []  # a line or event left unterminated is discarded

    def _lines(self, lines: list[bytes]) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(
                        ServerSentEvent(
                            self._event or "message", b"\n".join(self._data)
                        )
                    )
                self._event = ""
                self._data = []
                continue
            if line[0] == 0x3A:  # ":" starts a comment (servers send keep-alives)
                continue
            field, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                self._data.append(value)
            elif field == b"event":
                self._event = value.decode("utf-8", "replace")
            # "id" and "retry" steer reconnection, which a model call never does.
        return events
