"""What the fake OpenAI server says: scripted actions, rendered per API.

Responses streams are ``event:`` + ``data:`` SSE events from
``response.created`` to ``response.completed`` (no ``[DONE]``); Chat
Completions streams are ``data:`` lines of ``chat.completion.chunk``
objects, tool-call deltas by index, a usage chunk with empty ``choices``
when asked for, then ``data: [DONE]``. ``tests/providers/test_wire_format.py``
checks these renderings against the ``openai`` package's typed models.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Token counts, rendered in each dialect's own usage shape."""

    input: int = 12
    cached: int = 4
    output: int = 7
    reasoning: int = 2
    cache_write: int = 0

    def responses(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input,
            "input_tokens_details": {
                "cached_tokens": self.cached,
                "cache_write_tokens": 0,
            },
            "output_tokens": self.output,
            "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": self.input + self.output,
        }

    def chat(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.input,
            "completion_tokens": self.output,
            "total_tokens": self.input + self.output,
            "prompt_tokens_details": {"cached_tokens": self.cached},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning},
        }


DEFAULT_USAGE = Usage()


@dataclass(frozen=True)
class Call:
    """A function call the fake model makes."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """A model answer: text (in ``chunks`` deltas) and/or function calls.

    ``cut_after`` closes the connection after that many events;
    ``malformed_after`` sends broken JSON after that many; ``error_after``
    reports a failure inside the stream after that many; ``stream=False``
    ignores ``stream: true`` and answers one JSON object.
    """

    text: str | None = None
    calls: tuple[Call, ...] = ()
    chunks: int = 1
    argument_chunks: int = 1
    usage: Usage | None = DEFAULT_USAGE
    cut_after: int | None = None
    malformed_after: int | None = None
    error_after: int | None = None
    error_message: str = "The server had an error while processing your request."
    stream: bool = True
    thinking: str | None = None
    redacted_thinking: str | None = None


@dataclass(frozen=True)
class Fail:
    """An HTTP error answer with an OpenAI-style error body (or ``body``)."""

    status: int
    message: str = "something went wrong"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    type: str = "invalid_request_error"
    code: str | None = None


@dataclass(frozen=True)
class Hang:
    """Read the request and never answer (until the server stops)."""


@dataclass(frozen=True)
class Trickle:
    """Stream a delta every ``interval`` seconds until the client goes away."""

    text: str = "tick "
    interval: float = 0.01


@dataclass(frozen=True)
class Compacted:
    """The answer of ``/responses/compact``."""

    output: tuple[dict[str, Any], ...]
    usage: Usage | None = DEFAULT_USAGE


Action = Reply | Fail | Hang | Trickle | Compacted


def model_of(body: Any) -> str:
    """The model a request named (echoed in the answer, as servers do)."""
    return str(body.get("model", "fake")) if isinstance(body, dict) else "fake"


def wants_usage(body: Any) -> bool:
    """Whether a chat request asked for the usage chunk."""
    options = body.get("stream_options") if isinstance(body, dict) else None
    return bool(isinstance(options, dict) and options.get("include_usage"))


def _split(text: str, pieces: int) -> list[str]:
    pieces = max(1, min(pieces, len(text))) if text else 1
    size, extra = divmod(len(text), pieces)
    out, start = [], 0
    for index in range(pieces):
        end = start + size + (1 if index < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def in_stream_error(events: tuple[bytes, ...], number: int, message: str) -> bytes:
    """A failure reported inside the stream, in the dialect of ``events``."""
    if events and events[0].startswith(b"event:"):
        payload = {
            "type": "error",
            "code": "server_error",
            "message": message,
            "param": None,
            "sequence_number": number,
        }
        return b"event: error\ndata: %s\n\n" % json.dumps(payload).encode()
    error = {"message": message, "type": "server_error", "param": None, "code": None}
    return b"data: %s\n\n" % json.dumps({"error": error}).encode()


@lru_cache(maxsize=64)
def render_events(
    reply: Reply, dialect: str, model: str, include_usage: bool
) -> tuple[bytes, ...]:
    """The SSE events of ``reply``, one per chunk to send (cached: the bench
    asks for the same answer thousands of times)."""
    if dialect == "responses":
        return tuple(_responses_events(reply, model))
    return tuple(_chat_events(reply, model, include_usage))


def _response_object(
    model: str, status: str, output: list[Any], usage: Usage | None, response_id: str
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "store": False,
        "usage": usage.responses() if usage and status == "completed" else None,
    }


def _output_items(reply: Reply) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(in-progress item, completed item) for each output item of ``reply``."""
    items = []
    if reply.text is not None:
        message_id = f"msg_{uuid.uuid4().hex}"
        part = {"type": "output_text", "text": reply.text, "annotations": []}
        base = {"id": message_id, "type": "message", "role": "assistant"}
        items.append(
            (
                {**base, "status": "in_progress", "content": []},
                {**base, "status": "completed", "content": [part]},
            )
        )
    for call in reply.calls:
        base = {
            "id": f"fc_{uuid.uuid4().hex}",
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
        }
        items.append(
            (
                {**base, "arguments": "", "status": "in_progress"},
                {**base, "arguments": call.arguments, "status": "completed"},
            )
        )
    return items


def _responses_events(reply: Reply, model: str) -> list[bytes]:
    response_id = f"resp_{uuid.uuid4().hex}"
    events: list[dict[str, Any]] = []

    def add(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    add(
        "response.created",
        response=_response_object(model, "in_progress", [], None, response_id),
    )
    add(
        "response.in_progress",
        response=_response_object(model, "in_progress", [], None, response_id),
    )
    items = _output_items(reply)
    for index, (started, done) in enumerate(items):
        add("response.output_item.added", output_index=index, item=started)
        where = {"item_id": done["id"], "output_index": index}
        if done["type"] == "message":
            text = done["content"][0]["text"]
            empty = {"type": "output_text", "text": "", "annotations": []}
            add("response.content_part.added", **where, content_index=0, part=empty)
            for piece in _split(text, reply.chunks):
                add(
                    "response.output_text.delta",
                    **where,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            add(
                "response.output_text.done",
                **where,
                content_index=0,
                text=text,
                logprobs=[],
            )
            add(
                "response.content_part.done",
                **where,
                content_index=0,
                part=done["content"][0],
            )
        else:
            for piece in _split(done["arguments"], reply.argument_chunks):
                add("response.function_call_arguments.delta", **where, delta=piece)
            add(
                "response.function_call_arguments.done",
                **where,
                name=done["name"],
                arguments=done["arguments"],
            )
        add("response.output_item.done", output_index=index, item=done)
    output = [done for _, done in items]
    add(
        "response.completed",
        response=_response_object(model, "completed", output, reply.usage, response_id),
    )
    return [
        b"event: %s\ndata: %s\n\n"
        % (event["type"].encode(), json.dumps(event).encode())
        for event in events
    ]


def _chat_events(reply: Reply, model: str, include_usage: bool) -> list[bytes]:
    base: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }
    if include_usage:
        base["usage"] = None
    chunks: list[dict[str, Any]] = []

    def add(delta: dict[str, Any], finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        chunks.append({**base, "choices": [choice]})

    add({"role": "assistant", "content": "", "refusal": None})
    if reply.text is not None:
        for piece in _split(reply.text, reply.chunks):
            add({"content": piece})
    for index, call in enumerate(reply.calls):
        first = {
            "index": index,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        add({"tool_calls": [first]})
        for piece in _split(call.arguments, reply.argument_chunks):
            add({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    add({}, "tool_calls" if reply.calls else "stop")
    if include_usage and reply.usage is not None:
        chunks.append({**base, "choices": [], "usage": reply.usage.chat()})
    return [b"data: %s\n\n" % json.dumps(chunk).encode() for chunk in chunks] + [
        b"data: [DONE]\n\n"
    ]


def render_whole(reply: Reply, dialect: str, model: str) -> dict[str, Any]:
    """The non-streamed answer (for a server that ignores ``stream``)."""
    if dialect == "responses":
        output = [done for _, done in _output_items(reply)]
        return _response_object(
            model, "completed", output, reply.usage, f"resp_{uuid.uuid4().hex}"
        )
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text,
        "refusal": None,
    }
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.calls else "stop",
            }
        ],
        "usage": reply.usage.chat() if reply.usage else None,
    }
