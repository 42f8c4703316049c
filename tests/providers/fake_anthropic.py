"""What the fake server says in Anthropic's Messages dialect (``POST /v1/messages``).

The same scripted actions as the OpenAI dialects (``Reply``, ``Fail``,
``Trickle``, ...), rendered as the Messages API's streaming events:
``message_start`` (with the input usage, cache reads and writes),
``content_block_start`` / ``content_block_delta`` / ``content_block_stop``
per block (thinking with its signature, text, ``tool_use`` with
``input_json_delta``), ``message_delta`` (stop reason, output usage) and
``message_stop``, each an ``event:`` + ``data:`` SSE event, with a
``ping``. Errors are ``{"type": "error", "error": {"type", "message"}}``,
as an HTTP body or an in-stream ``error`` event. The fake server
(``fake_openai.py``) answers ``/v1/messages`` with these;
``tests/providers/test_anthropic_wire.py`` checks them against the
``anthropic`` package's typed event models.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from functools import lru_cache
from typing import Any

from fake_openai_wire import Fail, Reply, Usage

MESSAGES_PATH = "/v1/messages"


def signature_of(thinking: str) -> str:
    """The signature the fake gives a thinking block (tests expect it back)."""
    return "sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:16]


def anthropic_usage(usage: Usage | None) -> dict[str, Any]:
    """``usage`` in Anthropic's shape: input_tokens leaves the cache out."""
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    return {
        "input_tokens": usage.input - usage.cached - usage.cache_write,
        "cache_read_input_tokens": usage.cached,
        "cache_creation_input_tokens": usage.cache_write,
        "output_tokens": usage.output,
    }


def _split(text: str, pieces: int) -> list[str]:
    pieces = max(1, min(pieces, len(text))) if text else 1
    size, extra = divmod(len(text), pieces)
    out, start = [], 0
    for index in range(pieces):
        end = start + size + (1 if index < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    """The content blocks of ``reply``, complete, in the API's order."""
    blocks: list[dict[str, Any]] = []
    if reply.thinking is not None:
        blocks.append(
            {
                "type": "thinking",
                "thinking": reply.thinking,
                "signature": signature_of(reply.thinking),
            }
        )
    if reply.redacted_thinking is not None:
        blocks.append({"type": "redacted_thinking", "data": reply.redacted_thinking})
    if reply.text is not None:
        blocks.append({"type": "text", "text": reply.text, "citations": None})
    blocks.extend(
        {
            "type": "tool_use",
            "id": call.call_id,
            "name": call.name,
            "input": _object(call.arguments),
        }
        for call in reply.calls
    )
    return blocks


def _object(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return {}


def _message(model: str, content: list[Any], usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }


@lru_cache(maxsize=64)
def render_anthropic_events(reply: Reply, model: str) -> tuple[bytes, ...]:
    """The SSE events of ``reply`` (cached: the bench asks thousands of times)."""
    usage = anthropic_usage(reply.usage)
    start_message = _message(model, [], {**usage, "output_tokens": 1})
    if reply.usage is None:  # a compatible server that reports none
        del start_message["usage"]
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start_message},
        {"type": "ping"},
    ]
    blocks = _blocks(reply)
    first_call = len(blocks) - len(reply.calls)
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": piece}
                for piece in _split(block["thinking"], reply.chunks)
            ] + [{"type": "signature_delta", "signature": block["signature"]}]
        elif kind == "text":
            start = {"type": "text", "text": "", "citations": None}
            deltas = [
                {"type": "text_delta", "text": piece}
                for piece in _split(block["text"], reply.chunks)
            ]
        elif kind == "tool_use":
            start = {**block, "input": {}}
            # The arguments as scripted: a test may script broken JSON.
            arguments = reply.calls[index - first_call].arguments
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _split(arguments, reply.argument_chunks)
            ]
        else:  # redacted_thinking comes whole
            start, deltas = block, []
        events.append(
            {"type": "content_block_start", "index": index, "content_block": start}
        )
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": delta}
            for delta in deltas
        )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if reply.calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    if reply.usage is None:
        del events[-1]["usage"]
    events.append({"type": "message_stop"})
    return tuple(
        b"event: %s\ndata: %s\n\n"
        % (event["type"].encode(), json.dumps(event).encode())
        for event in events
    )


def render_anthropic_whole(reply: Reply, model: str) -> dict[str, Any]:
    """The non-streamed message (for a server that ignores ``stream``)."""
    message = _message(model, _blocks(reply), anthropic_usage(reply.usage))
    message["stop_reason"] = "tool_use" if reply.calls else "end_turn"
    return message


def anthropic_error(error_type: str, message: str) -> dict[str, Any]:
    """Anthropic's error object, as an HTTP body or an ``error`` event."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


def anthropic_fail_body(fail: Fail) -> bytes:
    """The HTTP error body of ``fail`` in Anthropic's shape."""
    if fail.body is not None:
        return fail.body
    return json.dumps(anthropic_error(fail.type, fail.message)).encode()


def anthropic_stream_error(message: str) -> bytes:
    """An ``error`` event inside the stream (an overload mid-answer)."""
    payload = json.dumps(anthropic_error("overloaded_error", message)).encode()
    return b"event: error\ndata: %s\n\n" % payload
