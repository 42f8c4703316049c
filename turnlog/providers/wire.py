"""What both dialects share at the wire: turnlog's own keys, usage, events.

Context items carry turnlog's bookkeeping (``turnlog_kind``,
``input_kind``, ``attachments``, ``prompt_cache_breakpoint`` on content
parts); no server may see them, so each dialect builds its request from
the fields it knows and turns attachments into a note the model can read.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
import msgspec

from turnlog.domain.model import Item, ModelRequest
from turnlog.providers.errors import MalformedStreamError, ResponseFailedError
from turnlog.providers.http import Attempt
from turnlog.providers.sse import ServerSentEvent, SSEDecoder
from turnlog.providers.status import shorten

TURNLOG_ITEM_KEYS = frozenset({"input_kind", "attachments"})
"""Item keys turnlog adds besides those starting with ``turnlog_``."""

TEXT_PART_TYPES = frozenset({"input_text", "output_text", "text"})

DRAIN_SECONDS = 1.0
"""How long to read on after the last event, so the connection can be reused."""


def without_turnlog_keys(item: Mapping[str, Any]) -> Item:
    """A copy of ``item`` without turnlog's bookkeeping keys."""
    return {
        key: value
        for key, value in item.items()
        if key not in TURNLOG_ITEM_KEYS and not key.startswith("turnlog_")
    }


def attachment_note(item: Mapping[str, Any]) -> str | None:
    """A line per attached file, for the model; None without attachments.

    turnlog records references to files that live elsewhere, not their
    bytes, so the model is told what was attached and under which id.
    """
    attachments = item.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        return None
    lines = []
    for attachment in attachments:
        if not isinstance(attachment, Mapping):
            continue
        name = attachment.get("name", "unnamed")
        media_type = attachment.get("media_type", "unknown type")
        size = attachment.get("size", "?")
        file_id = attachment.get("id", "?")
        lines.append(
            f"[attached file: {name} ({media_type}, {size} bytes), id {file_id}]"
        )
    return "\n".join(lines) or None


def text_of_parts(parts: object) -> str | None:
    """The text of a list of content parts if every part is text, else None."""
    if not isinstance(parts, list):
        return None
    texts = []
    for part in parts:
        if not isinstance(part, Mapping) or part.get("type") not in TEXT_PART_TYPES:
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def put_count(usage: dict[str, int], key: str, value: object) -> None:
    """Sets ``usage[key]`` if ``value`` is a token count (a non-negative int)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        usage[key] = value


def token_usage(
    usage: Mapping[str, Any], input_key: str, output_key: str
) -> dict[str, int] | None:
    """A dialect's usage in turnlog's counters; None if it holds none.

    The dialects differ only in the names of the input and output counts
    (``prompt_tokens`` / ``input_tokens``, ...); each has its details
    under the same name with ``_details`` appended.
    """
    counts: dict[str, int] = {}
    put_count(counts, "input_tokens", usage.get(input_key))
    input_details = usage.get(f"{input_key}_details")
    if isinstance(input_details, dict):
        put_count(counts, "cached_input_tokens", input_details.get("cached_tokens"))
    put_count(counts, "output_tokens", usage.get(output_key))
    output_details = usage.get(f"{output_key}_details")
    if isinstance(output_details, dict):
        put_count(counts, "reasoning_tokens", output_details.get("reasoning_tokens"))
    put_count(counts, "total_tokens", usage.get("total_tokens"))
    return counts or None


def json_schema(request: ModelRequest) -> dict[str, Any]:
    """The OpenAI ``json_schema`` object asking for the request's output
    schema (strict where the schema allows it)."""
    schema = request.output_schema
    assert schema is not None
    described: dict[str, Any] = {
        "name": schema.name,
        "schema": schema.schema,
        "strict": schema.strict,
    }
    if schema.description:
        described["description"] = schema.description
    return described


def cache_key(session_id: str) -> str:
    """A stable prompt cache key for a session that does not reveal its id."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


def decode_event(event: ServerSentEvent, number: int, where: str) -> dict[str, Any]:
    """The JSON object an event carries; MalformedStreamError otherwise."""
    try:
        payload = msgspec.json.decode(event.data)
    except msgspec.DecodeError as error:
        sample = event.data[:80].decode("utf-8", "replace")
        msg = f"event {number} from {where} is not JSON ({error}): {sample!r}"
        raise MalformedStreamError(msg) from None
    if not isinstance(payload, dict):
        msg = f"event {number} from {where} is not a JSON object"
        raise MalformedStreamError(msg)
    return payload


def failure_from(
    error: object, where: str, redact: Callable[[str], str]
) -> ResponseFailedError:
    """The error for a failure the server reported inside the stream."""
    code: str | None = None
    message: object = error
    if isinstance(error, Mapping):
        raw_code = error.get("code") or error.get("type")
        code = str(raw_code) if raw_code is not None else None
        message = error.get("message") or code or "no message"
    text = f"the server reported a failure in the stream from {where}: {message}"
    if code and code != message:
        text += f" ({code})"
    return ResponseFailedError(shorten(redact(text)), code)


def content_type_of(headers: Mapping[str, str]) -> str:
    """The media type of a response, lower-case, without parameters."""
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def is_whole_answer(headers: Mapping[str, str], where: str) -> bool:
    """True if the answer is one JSON body, False if it is an event stream.

    A server that ignores ``stream: true`` answers with the whole body;
    any other content type is a MalformedStreamError.
    """
    media_type = content_type_of(headers)
    if media_type == "application/json":
        return True
    if media_type != "text/event-stream":
        got = media_type or "no content type"
        msg = f"expected an event stream from {where}, got {got}"
        raise MalformedStreamError(msg)
    return False


def decode_body(body: bytes, where: str) -> dict[str, Any]:
    """A whole JSON response body as an object; MalformedStreamError otherwise."""
    try:
        payload = msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        msg = f"the answer from {where} is not JSON: {error}"
        raise MalformedStreamError(msg) from None
    if not isinstance(payload, dict):
        msg = f"the answer from {where} is not a JSON object"
        raise MalformedStreamError(msg)
    return payload


async def read_events(
    response: httpx.Response, take: Callable[[list[ServerSentEvent]], bool]
) -> bool:
    """Feeds a stream's events to ``take``, a network chunk at a time.

    True once ``take`` returns True (what is left of the stream is then
    drained); False if the stream ended before it did.
    """
    decoder = SSEDecoder()
    chunks = response.aiter_bytes()
    async for chunk in chunks:
        if take(decoder.feed(chunk)):
            await drain(chunks)
            return True
    return take(decoder.end())


async def drain(chunks: AsyncIterator[bytes]) -> None:
    """Reads what is left of a finished stream, briefly, to keep the connection.

    An unread body forces the connection closed; a server that keeps the
    stream open after its last event costs at most ``DRAIN_SECONDS``.
    """
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in chunks:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass


class EventStream(abc.ABC):
    """One streamed answer being read: where it comes from, its events so far.

    Each API dialect subclasses it with the state of its own answer and a
    ``handle`` for one decoded event.
    """

    def __init__(
        self, attempt: Attempt, where: str, redact: Callable[[str], str]
    ) -> None:
        self.attempt = attempt
        """The attempt whose streamed text goes to the subscribers."""
        self.where = where
        self.redact = redact
        self.number = 0
        """Events taken so far (named in the error of a malformed one)."""
        self.model: str | None = None
        """The model that answered, as the answer named it (None if not)."""

    def note_model(self, model: object) -> None:
        """Keeps the model an event names (the first non-empty one)."""
        if self.model is None and isinstance(model, str) and model:
            self.model = model

    def take(self, events: list[ServerSentEvent]) -> bool:
        """Takes the events of one chunk; True once the answer is complete."""
        for event in events:
            self.number += 1
            if self.handle(decode_event(event, self.number, self.where)):
                return True
        return False

    @abc.abstractmethod
    def handle(self, event: dict[str, Any]) -> bool:
        """Takes one decoded event; True once the answer is complete."""
